package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// backends are the sandbox backends the CLI knows.
var backends = []string{bwrap.Backend, docker.Backend, local.Backend}

// sandboxClients returns the sandbox backends a worker offers and the
// default one, want (--sandbox, TROUPE_SANDBOX) or else bwrap. It offers
// bwrap when bubblewrap works here, docker when its engine answers, and
// the unconfined local backend only when chosen: as want, or by an agent
// of graphs that names it. It fails, saying why and how to fix it, when
// a backend that an agent of graphs needs (its own, or the default) is
// unusable: a worker never falls back to a weaker sandbox by itself.
// Workspaces live under $TROUPE_HOME/sandboxes. Manifests may copy host
// files from roots and from TROUPE_SANDBOX_ALLOWED_ROOTS (a list like
// PATH), and from nowhere else.
func sandboxClients(graphs []Graph, want string, roots []string, stderr io.Writer) (map[string]sandbox.Client, string, error) {
	if want == "" {
		want = bwrap.Backend
	}
	if !slices.Contains(backends, want) {
		return nil, "", fmt.Errorf("--sandbox %q: choose bwrap, docker or local", want)
	}
	needed := neededBackends(graphs, want)
	policy := sandbox.Policy{AllowedRoots: roots}
	for _, r := range filepath.SplitList(os.Getenv("TROUPE_SANDBOX_ALLOWED_ROOTS")) {
		if r != "" {
			policy.AllowedRoots = append(policy.AllowedRoots, r)
		}
	}
	dir, err := home()
	if err != nil {
		return nil, "", err
	}
	root := filepath.Join(dir, "sandboxes")
	clients := map[string]sandbox.Client{}
	unusable := map[string]error{}
	if want == local.Backend || needed[local.Backend] != nil {
		lc, err := local.New(local.Config{Root: filepath.Join(root, local.Backend), Policy: policy})
		if err != nil {
			return nil, "", err
		}
		clients[local.Backend] = lc
	}
	if bc, err := bwrap.New(bwrap.Config{Root: filepath.Join(root, bwrap.Backend), Policy: policy}); err == nil {
		clients[bwrap.Backend] = bc
	} else {
		unusable[bwrap.Backend] = err
	}
	if dc, err := docker.New(docker.Config{Root: filepath.Join(root, docker.Backend), Policy: policy}); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := dc.Ping(ctx); err == nil {
			clients[docker.Backend] = dc
		} else {
			unusable[docker.Backend] = err
		}
		cancel()
	} else {
		unusable[docker.Backend] = err
	}
	for _, b := range slices.Sorted(maps.Keys(needed)) {
		if !slices.Contains(backends, b) {
			return nil, "", fmt.Errorf("%s name the sandbox backend %q, which Troupe does not have: use bwrap, docker or local", strings.Join(needed[b], ", "), b)
		}
		if _, ok := clients[b]; !ok {
			return nil, "", fmt.Errorf("the %s sandbox backend is unusable here, and %s need it: %v\n%s",
				b, strings.Join(needed[b], ", "), unusable[b], backendFix(b, clients))
		}
	}
	return clients, want, nil
}

// neededBackends returns, by backend, the agents of graphs whose sandbox
// runs on it (def for those that name none).
func neededBackends(graphs []Graph, def string) map[string][]string {
	out := map[string][]string{}
	for _, g := range graphs {
		for _, a := range g.Graph.Agents() {
			if a.Sandbox == nil {
				continue
			}
			b := a.Sandbox.Backend
			if b == "" {
				b = def
			}
			out[b] = append(out[b], g.Graph.Name()+"/"+a.Name)
		}
	}
	return out
}

// backendFix says how to make backend usable, or what to choose instead.
func backendFix(backend string, usable map[string]sandbox.Client) string {
	var fix string
	switch backend {
	case bwrap.Backend:
		fix = "Install bubblewrap (apt-get install bubblewrap; `make setup` does) and allow unprivileged user namespaces (Debian: sysctl kernel.unprivileged_userns_clone=1; Ubuntu 23.10+: sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap)"
	case docker.Backend:
		fix = "Start the Docker Engine (dockerd; `make setup` installs and starts it) or set DOCKER_HOST"
	default:
		fix = "Fix the error above"
	}
	if _, ok := usable[docker.Backend]; ok && backend != docker.Backend {
		fix += ", or choose --sandbox docker"
	}
	return fix + ". --sandbox local runs sandboxes unconfined (no isolation: commands see the host, its files and its network); choose it only for trusted agents."
}

// describeSandboxes is the worker's start-up line about its backends.
func describeSandboxes(clients map[string]sandbox.Client, def string) string {
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(clients)) {
		p := troupe.BackendLabel(b)
		if b == def {
			p += " [default]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
