package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/testgraphs"
	"github.com/troupe-dev/troupe/runtime/model"
)

const (
	// envEdited makes the worker process serve testgraphs.EditedDealDesk
	// in place of the deal-desk graph: a redeploy with an edited graph.
	envEdited = "TROUPE_E2E_EDITED"
	// envHoldModel makes the worker process's model hold every request
	// whose instructions hold this text until the worker dies, after
	// adding a line to the file envHoldModelFile names (created by the
	// first).
	envHoldModel     = "TROUPE_E2E_HOLD_MODEL"
	envHoldModelFile = "TROUPE_E2E_HOLD_MODEL_FILE"
	// envHoldModelUser, when set, narrows envHoldModel to the requests
	// whose last user message holds this text too.
	envHoldModelUser = "TROUPE_E2E_HOLD_MODEL_USER"
)

// workerGraphs are the graphs a worker process serves.
func workerGraphs(backend string) []*agents.Graph {
	graphs := append(allGraphs(), sandboxGraphs(backend)...)
	if scope := os.Getenv(envMemoryScope); scope != "" {
		graphs = append(graphs, memoryGraph("memcrash", scope))
	}
	if os.Getenv(envEdited) != "" {
		for i, g := range graphs {
			if g.Name() == "dealdesk" {
				graphs[i] = testgraphs.EditedDealDesk()
			}
		}
	}
	return graphs
}

// redeployHooks wraps a worker process's model for TestRedeployMidRun;
// without envHoldModel it is returned as it is.
func redeployHooks(m model.Model) model.Model {
	if os.Getenv(envHoldModel) == "" {
		return m
	}
	return heldModel{Model: m, match: os.Getenv(envHoldModel), user: os.Getenv(envHoldModelUser), file: os.Getenv(envHoldModelFile)}
}

type heldModel struct {
	model.Model
	match, user, file string
}

func (h heldModel) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	if !strings.Contains(req.Instructions, h.match) || !strings.Contains(lastUser(req), h.user) {
		return h.Model.Respond(ctx, req)
	}
	f, err := os.OpenFile(h.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString("held\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// lastUser is the text of req's last user message.
func lastUser(req model.Request) string {
	for i := len(req.Input) - 1; i >= 0; i-- {
		if it := req.Input[i]; it.Type == agents.ItemMessage && it.Role == "user" {
			return it.Content
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer that a process's output and the test can
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	os.Stderr.Write(p)
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRedeployMidRun: the worker of a deal-desk run is killed (SIGKILL)
// while the rollout reviewer waits on its model, and a worker redeployed
// with an edited graph (the triage handoff gained an input filter, the
// coordinator lost its review_rollout tool: each would change what the
// run's workflows did, were they read from the graph served) finishes the
// run. The run completes with the recommendation of an undisturbed run,
// and the new worker logs no nondeterminism error.
func TestRedeployMidRun(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	blobDir, queue := t.TempDir(), fmt.Sprintf("redeploy-%d", os.Getpid())
	held := filepath.Join(t.TempDir(), "held")
	first := spawnWorker(t, url, blobDir, queue, envHoldModel+"=rollout reviewer", envHoldModelFile+"="+held)

	run, err := client.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rollout reviewer did not call its model in a minute")
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	var log syncBuffer
	spawnWorkerTo(t, &log, url, blobDir, queue, envEdited+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the run after the redeploy: %v", err)
	}
	rec, err := agents.Decode[dealdesk.Recommendation](res.Output)
	if err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	if rec.Decision != "approve_with_conditions" || rec.PricingRisk != "high" || rec.RolloutRisk != "medium" || len(rec.Conditions) != 2 {
		t.Errorf("recommendation = %+v, want the one of an undisturbed run", rec)
	}
	if got := strings.Join(res.Path, ">"); got != "triage>coordinator" {
		t.Errorf("path = %s", got)
	}
	for _, bad := range []string{"TMPRL1100", "nondeterministic"} {
		if strings.Contains(log.String(), bad) {
			t.Errorf("the redeployed worker logged %q:\n%s", bad, log.String())
		}
	}
}

// TestRegisterAloneFailsLoudly: a worker wired with Runner.Register alone
// (no worker on its sandbox store's queue) fails a sandbox agent's run at
// its first sandbox, with ErrStoreNotServed naming the fix, instead of
// running on with "sandbox lost" answers to a degraded result.
func TestRegisterAloneFailsLoudly(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-%d-%d", os.Getpid(), queues.Add(1))
	r := newRunner(t, url, "", queue, nil)
	w := worker.New(c, queue, worker.Options{})
	r.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := client.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "dealdesk", Input: "Review the Acme Corp deal"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(context.Background(), nil)
	if troupe.ErrorType(err) != troupe.ErrStoreNotServed || !strings.Contains(err.Error(), "StartWorkers") {
		t.Fatalf("run on a worker wired with Register alone: %v, want %s naming StartWorkers", err, troupe.ErrStoreNotServed)
	}
	// With -histories, its workflows' histories are a replay fixture: the
	// agents that fail on a worker fault (go test ./e2e -run
	// TestRegisterAloneFailsLoudly -histories ../workflows/testdata/histories/v4-worker-faults).
	if *historiesDir != "" {
		events, err := client.Events(context.Background(), c, run.GetID())
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, e := range events {
			ids[e.WorkflowID] = true
		}
		saveHistories(t, c, ids, *historiesDir, "dealdesk")
	}
}
