package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// bigFile writes a message of at least n bytes, every line of it
// different, to a file of dir, and returns the file and the message.
func bigFile(t *testing.T, dir string, n int) (string, string) {
	t.Helper()
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %09d of a message too big for one Temporal payload\n", i)
	}
	msg := b.String()
	file := filepath.Join(dir, fmt.Sprintf("msg-%d.txt", n))
	if err := os.WriteFile(file, []byte(msg), 0o600); err != nil {
		t.Fatal(err)
	}
	// What sessions send reads drops the last newline.
	return file, strings.TrimRight(msg, "\n")
}

// TestBigMessages: `troupe sessions send --file` and `troupe run --file`
// take messages far past what one Temporal payload takes. A 9 MiB message
// reaches the model whole (it answers with the message's size and hash)
// while no workflow's history holds it; a 50 MB one, past what OpenAI
// takes in one message, fails its turn with the model's typed error and
// the session goes on; one past troupe.MessageLimit is refused, typed,
// before anything starts.
func TestBigMessages(t *testing.T) {
	parallel(t)
	home, dir := t.TempDir(), t.TempDir()
	port := strconv.Itoa(freePort(t))
	dev := startCLI(t, home, "dev", "--port", port, "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	id := strings.TrimSpace(runCLI(t, home, "sessions", "new", "measure"))

	nine, msg := bigFile(t, dir, 9<<20)
	sum := sha256.Sum256([]byte(msg))
	answer := fmt.Sprintf("got %d bytes, sha256 %s", len(msg), hex.EncodeToString(sum[:]))
	if out := runCLI(t, home, "sessions", "send", id, "--file", nine); !strings.Contains(out, answer) {
		t.Fatalf("sessions send --file of %d bytes printed %q, want %q", len(msg), troupe.Preview(out, 300), answer)
	}
	// The run's input too, from standard input.
	r := startCLI(t, home, "run", "--graph", "measure", "--quiet", "--file", nine)
	if code := r.wait(t); code != 0 || !strings.Contains(r.stdout.String(), answer) {
		t.Fatalf("run --file: exit %d, printed %q; stderr:\n%s", code, troupe.Preview(r.stdout.String(), 300), r.errText())
	}

	// No history of the session's workflows (the session, its turn's
	// agents) holds the message: only its reference and preview.
	c := devClient(t, home)
	chunk := msg[len(msg)/2 : len(msg)/2+200]
	for _, wf := range workflowTree(t, c, id) {
		size, holds := historyHolds(t, c, wf, chunk)
		if holds || size > troupe.MessageInline {
			t.Errorf("the history of %s is %d bytes and holds the message: %v; want under %d bytes, without it", wf, size, holds, troupe.MessageInline)
		}
	}

	// 50 MB: taken, and refused by the model as OpenAI refuses it.
	fifty, _ := bigFile(t, dir, 50_000_000)
	big := startCLI(t, home, "sessions", "send", id, "--file", fifty)
	if code := big.wait(t); code == 0 || !strings.Contains(big.errText(), "string too long") || !strings.Contains(big.errText(), troupe.ErrModel) {
		t.Errorf("sessions send of 50 MB: exit %d; stderr:\n%s\nwant the model's refusal (%s: string too long)", code, troupe.Preview(big.errText(), 2000), troupe.ErrModel)
	}
	if out := runCLI(t, home, "sessions", "send", id, "and now a short one"); !strings.Contains(out, "got 19 bytes") {
		t.Errorf("after the refused turn, the session answered %q", out)
	}

	// A command whose blob store is not the workers' says so, and sends
	// nothing: the workers would not find the message.
	other := "file://" + t.TempDir()
	wrong := startCLIEnv(t, home, []string{"TROUPE_BLOB_URL=" + other}, "sessions", "send", id, "--file", nine)
	if code := wrong.wait(t); code == 0 || !strings.Contains(wrong.errText(), troupe.ErrBlobMissing) || !strings.Contains(wrong.errText(), other) {
		t.Errorf("sessions send through another store: exit %d; stderr:\n%s\nwant %s naming both stores", code, wrong.errText(), troupe.ErrBlobMissing)
	}

	// Past the limit: refused before anything is sent.
	huge, _ := bigFile(t, dir, troupe.MessageLimit+1)
	for _, args := range [][]string{{"sessions", "send", id, "--file", huge}, {"run", "--graph", "measure", "--file", huge}} {
		r := startCLI(t, home, append(args, "--json")...)
		code := r.wait(t)
		var out struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stdout.String()), &out); code == 0 || err != nil || out.Error.Type != troupe.ErrPayloadTooLarge {
			t.Errorf("troupe %s: exit %d, printed %q (%v); want a %s error", strings.Join(args[:2], " "), code, troupe.Preview(r.stdout.String(), 300), err, troupe.ErrPayloadTooLarge)
		}
	}
	var info troupeclient.SessionInfo
	if err := json.Unmarshal([]byte(runCLI(t, home, "sessions", "show", id, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Turns != 3 {
		t.Errorf("the session had %d turns, want 3 (9 MiB, 50 MB, short): the message over the limit started none", info.Turns)
	}
	if *historiesDir != "" {
		runCLI(t, home, "sessions", "stop", id)
		ids := map[string]bool{}
		for _, wf := range workflowTree(t, c, id) {
			ids[wf] = true
		}
		saveHistories(t, c, ids, *historiesDir, "measure-session")
	}
}

// workflowTree is id and every workflow it started, at any depth.
func workflowTree(t *testing.T, c client.Client, id string) []string {
	t.Helper()
	out := []string{id}
	for i := 0; i < len(out); i++ {
		it := c.GetWorkflowHistory(context.Background(), out[i], "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
				out = append(out, a.GetWorkflowId())
			}
		}
	}
	return out
}

// historyHolds is the size of workflow id's history (its current run),
// and whether an event of it holds chunk.
func historyHolds(t *testing.T, c client.Client, id, chunk string) (int, bool) {
	t.Helper()
	size, holds := 0, false
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		size += len(b)
		holds = holds || strings.Contains(string(b), chunk)
	}
	return size, holds
}

// TestBigMessageOldWorkers: workers from before references never get a
// big message to run on its preview. A session on one rejects the update
// that carries a reference, and the client says the workers are too old;
// a run's input goes only to a queue whose workers all say they take
// references, so none starts on one of theirs.
func TestBigMessageOldWorkers(t *testing.T) {
	parallel(t)
	c := dial(t)
	queue := fmt.Sprintf("e2e-old-%d-%d", os.Getpid(), queues.Add(1))
	var mu sync.Mutex
	ran := 0
	w := worker.New(c, queue, worker.Options{})
	// Stand-ins of the workflows of an older worker: a session that knows
	// only troupe.send, an orchestrator that runs whatever it is given.
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ troupe.SessionInput) error {
		if err := workflow.SetUpdateHandler(ctx, troupe.SendUpdate, func(ctx workflow.Context, _ troupe.SendInput) (troupe.SendResult, error) {
			return troupe.SendResult{Turn: "t1"}, nil
		}); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}, workflow.RegisterOptions{Name: troupe.SessionWorkflowName})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ troupe.RunInput) error {
		mu.Lock()
		ran++
		mu.Unlock()
		return nil
	}, workflow.RegisterOptions{Name: troupe.OrchestratorWorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The server lists the worker once it has polled.
	for {
		d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.GetPollers()) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the old worker is never listed")
		case <-time.After(50 * time.Millisecond):
		}
	}
	store, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue, Inputs: store})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a big message. ", troupe.MessageInline/10)

	if _, err := cl.Start(ctx, troupe.RunInput{Graph: "measure", Input: big}); troupe.ErrorType(err) != troupe.ErrWorkerTooOld {
		t.Errorf("a big run input to old workers: %v; want %s", err, troupe.ErrWorkerTooOld)
	}
	// A small one goes as it always did.
	small, err := cl.Start(ctx, troupe.RunInput{Graph: "measure", Input: "small"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.GetWorkflow(ctx, small.ID(), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}

	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "session-old-" + queue, TaskQueue: queue}, troupe.SessionWorkflowName, troupe.SessionInput{Graph: "measure"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.TerminateWorkflow(context.Background(), wr.GetID(), "", "test over") }()
	s := cl.Session(wr.GetID())
	if _, err := s.Send(ctx, big, false); troupe.ErrorType(err) != troupe.ErrWorkerTooOld || !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("a big message to a session of an old worker: %v; want %s saying to upgrade", err, troupe.ErrWorkerTooOld)
	}
	if res, err := s.Send(ctx, "small", false); err != nil || res.Turn != "t1" {
		t.Errorf("a small message: %+v, %v; want it taken", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != 1 {
		t.Errorf("the old worker ran %d runs, want 1: the small one alone", ran)
	}
}
