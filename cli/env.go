package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// home is TROUPE_HOME, or ~/.troupe.
func home() (string, error) { return devserver.DefaultDir() }

// openStore opens TROUPE_BLOB_URL or the default file store, and checks
// that it can be written and read, so that a wrong URL or missing
// credentials stop the command at once. It returns the store's URL too.
func openStore(ctx context.Context) (*blob.Store, string, error) {
	url, err := blobURL()
	if err != nil {
		return nil, "", err
	}
	store, err := blob.Open(ctx, url)
	if err != nil {
		return nil, "", fmt.Errorf("TROUPE_BLOB_URL: %w", err)
	}
	if err := store.Check(ctx); err != nil {
		store.Close()
		return nil, "", fmt.Errorf("TROUPE_BLOB_URL: %w", err)
	}
	return store, url, nil
}

// blobURL is TROUPE_BLOB_URL, or the default file store in TROUPE_HOME.
func blobURL() (string, error) {
	if url := os.Getenv("TROUPE_BLOB_URL"); url != "" {
		return url, nil
	}
	dir, err := home()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "blobs"), nil
}

// modelFor returns the model a worker uses: OpenAI (or a compatible server)
// when OPENAI_API_KEY is set, else a scripted server on loopback playing
// the graphs' offline scenarios. The returned func releases it.
func modelFor(graphs []Graph, stderr io.Writer) (model.Model, string, func(), error) {
	if os.Getenv("OPENAI_API_KEY") != "" {
		cfg := model.ConfigFromEnv()
		m, err := model.New(cfg)
		return m, modelName(cfg), func() {}, err
	}
	sc := &scripted.Scenario{}
	var names []string
	for _, g := range graphs {
		if len(g.Scenario) == 0 {
			continue
		}
		s, err := scripted.ParseScenario(g.Scenario)
		if err != nil {
			return nil, "", nil, fmt.Errorf("cli: offline scenario of graph %s: %w", g.Graph.Name(), err)
		}
		source := g.ScenarioFile
		if source == "" {
			source = "the offline scenario of graph " + g.Graph.Name()
		}
		for _, r := range s.Rules {
			r.Name = g.Graph.Name() + "/" + r.Name
			r.Source = source
			sc.Rules = append(sc.Rules, r) // Its intent goes with it.
		}
		names = append(names, g.Graph.Name())
	}
	if len(sc.Rules) == 0 {
		return nil, "", nil, errors.New("cli: OPENAI_API_KEY is not set and no graph has an offline scenario")
	}
	srv := scripted.New(sc)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	fmt.Fprintf(stderr, "troupe: OPENAI_API_KEY is not set: using the offline scenario of %s (scripted model at %s)\n", strings.Join(names, ", "), base)
	cfg := model.ConfigFromEnv()
	cfg.APIKey, cfg.BaseURL = "offline", base
	m, err := model.New(cfg)
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	return m, offlineModel, func() { srv.Close() }, nil
}

// offlineModel names the model of a worker without OPENAI_API_KEY: the
// graphs' offline scenarios.
const offlineModel = "the offline scenarios"

// modelName names the model a worker with cfg calls, for its identity
// (never its key): its API and base URL.
func modelName(cfg model.Config) string {
	api, base := cfg.API, cfg.BaseURL
	if api == "" {
		api = model.APIResponses
	}
	if base == "" {
		base = model.DefaultBaseURL
	}
	return fmt.Sprintf("the %s API at %s", api, strings.TrimRight(base, "/"))
}

func graphList(graphs []Graph) []*agents.Graph {
	out := make([]*agents.Graph, len(graphs))
	for i, g := range graphs {
		out[i] = g.Graph
	}
	return out
}
