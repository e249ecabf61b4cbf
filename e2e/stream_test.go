package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
)

// TestTextStreamsToFollowers: the stream agent's long answer (800 ms of
// thinking, then about 40 pieces) reaches followers as it is generated,
// through each path a follower can take, and never enters a history.
//
//   - another process: the worker is a process of its own, which listens
//     on no port at all; the follower, in the test process with no bus,
//     finds the worker's live feed in its identity on the task queue and
//     queries it through the server: what a follower on another host
//     does, for it reaches nothing of the worker's but through Temporal;
//   - the client package, the same way (Run.Follow with WithDeltas);
//   - the worker's own process: FollowLive with the worker's bus (its own
//     feed, which the task queue also lists, is not read twice);
//   - a worker that serves no feed: no deltas, a notice that says so, no
//     error, every recorded event.
//
// In each, the turn's deltas all come before the turn's model_turn event
// and add up to the answer. The histories of a run followed with deltas
// and of one on a worker that serves none hold the same events.
func TestTextStreamsToFollowers(t *testing.T) {
	parallel(t)
	c := dial(t)
	_, modelURL := modelServer(t)
	// Queues of this run of the test only: under -count, the server still
	// lists the last run's stopped worker, and its feed, for a while.
	remoteQueue := fmt.Sprintf("stream-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd := spawnWorker(t, modelURL, t.TempDir(), remoteQueue)
	feed := waitFeed(t, c, remoteQueue)
	if !strings.HasPrefix(feed, "troupe-live/") {
		t.Errorf("the worker advertises live feed %q; want a troupe-live/ workflow", feed)
	}

	var remoteRun string
	t.Run("another process", func(t *testing.T) {
		run, res := startStream(t, c, remoteQueue, "hello from afar")
		remoteRun = run
		// Two followers: one asks for deltas, one does not.
		var streamed, plain followedEvents
		answer := follow(t, run, res, func(ctx context.Context) error {
			return troupeclient.FollowLive(ctx, c, run, 50*time.Millisecond, nil, streamed.add, troupeclient.WithDeltas())
		}, func(ctx context.Context) error {
			return troupeclient.Follow(ctx, c, run, 50*time.Millisecond, plain.add)
		})
		checkStreamed(t, streamed.all(), run, answer)
		if n := countDeltas(plain.all()); n != 0 {
			t.Errorf("a follower that did not ask for deltas got %d", n)
		}
		checkNoNotice(t, streamed.all())
		checkNoDeltaRecorded(t, c, run)
		// The worker served all that and listens on nothing: no port at all.
		if ports := listening(t, cmd.Process.Pid); len(ports) > 0 {
			t.Errorf("the worker process listens on %v; want no port at all", ports)
		}
	})

	t.Run("client", func(t *testing.T) {
		cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: remoteQueue})
		if err != nil {
			t.Fatal(err)
		}
		run, res := startStream(t, c, remoteQueue, "hello through the client")
		var streamed followedEvents
		answer := follow(t, run, res, func(ctx context.Context) error {
			return cl.Run(run).Follow(ctx, streamed.add, troupeclient.WithDeltas())
		})
		checkStreamed(t, streamed.all(), run, answer)
	})

	t.Run("the worker's own process", func(t *testing.T) {
		bus := events.NewBus()
		queue := startWorker(t, c, modelURL, "", func(cfg *workflows.Config) { cfg.Events = bus })
		if got := waitFeed(t, c, queue); got != bus.LiveFeed() {
			t.Errorf("the worker advertises live feed %q; its bus serves %q", got, bus.LiveFeed())
		}
		run, res := startStream(t, c, queue, "hello from here")
		var streamed followedEvents
		answer := follow(t, run, res, func(ctx context.Context) error {
			return troupeclient.FollowLive(ctx, c, run, 50*time.Millisecond, bus, streamed.add, troupeclient.WithDeltas())
		})
		checkStreamed(t, streamed.all(), run, answer)
		checkNoNotice(t, streamed.all())
	})

	t.Run("a worker that serves no feed", func(t *testing.T) {
		queue := fmt.Sprintf("stream-nofeed-%d-%d", os.Getpid(), time.Now().UnixNano())
		r := newRunner(t, modelURL, "", queue, nil) // no bus: no deltas, no feed
		stop, err := r.StartWorkers(c, queue, worker.Options{Identity: "no-feed"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		run, res := startStream(t, c, queue, "hello into the void")
		var got followedEvents
		follow(t, run, res, func(ctx context.Context) error {
			return troupeclient.FollowLive(ctx, c, run, 50*time.Millisecond, nil, got.add, troupeclient.WithDeltas())
		})
		evs := got.all()
		if n := countDeltas(evs); n != 0 {
			t.Errorf("%d deltas from a worker that serves none", n)
		}
		var notices []string
		for _, e := range evs {
			if e.Kind == troupe.EventLiveText {
				notices = append(notices, e.Detail)
			}
		}
		if len(notices) != 1 || !strings.Contains(notices[0], "no-feed") || !strings.Contains(notices[0], "show when they end") {
			t.Errorf("notices %q; want one that names the worker and says its turns show when they end", notices)
		}
		last := evs[len(evs)-1]
		if last.Kind != troupe.EventFinal || last.WorkflowID != run {
			t.Errorf("the follower's events end with %+v; want the run's final output", last)
		}
		// A run on a worker that publishes no deltas at all has the same
		// history as one whose deltas went to followers.
		if remoteRun != "" {
			for _, suffix := range []string{"", "/0-streamer"} {
				with, without := historyShape(t, c, remoteRun+suffix), historyShape(t, c, run+suffix)
				if with != without {
					t.Errorf("history of %s (deltas served): %s\nhistory of %s (no deltas): %s\nwant the same events", remoteRun+suffix, with, run+suffix, without)
				}
			}
		}
	})
}

// checkNoNotice checks that a follower was not told it gets no live text.
func checkNoNotice(t *testing.T, evs []troupe.Event) {
	t.Helper()
	for _, e := range evs {
		if e.Kind == troupe.EventLiveText {
			t.Errorf("notice: %s", e.Detail)
		}
	}
}

// listening returns the TCP ports on which process pid listens: the
// listening sockets of its network namespace (/proc/PID/net/tcp and tcp6,
// state 0A) whose inodes are among its open files.
func listening(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	if len(inodes) == 0 {
		t.Fatalf("process %d has no socket open: not the worker (it talks to Temporal)", pid)
	}
	var ports []string
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				ports = append(ports, table+" "+f[1])
			}
		}
	}
	return ports
}

// TestSessionsSendStreams: `troupe sessions send`, a process of its own,
// prints the reply's text as a `troupe dev` worker in another process
// generates it: the whole answer (far longer than a model_turn event's
// preview) on the turn's progress line.
func TestSessionsSendStreams(t *testing.T) {
	parallel(t)
	home := t.TempDir()
	dev := startCLI(t, home, "dev", "--port", strconv.Itoa(freePort(t)), "--ui-port", "-1")
	dev.waitLine(t, regexp.MustCompile(`^troupe: dev server up`))
	id := strings.TrimSpace(runCLI(t, home, "sessions", "new", "plod"))
	send := startCLI(t, home, "sessions", "send", id, "stream please")
	if code := send.wait(t); code != 0 {
		t.Fatalf("troupe sessions send: exit %d; stderr:\n%s", code, send.errText())
	}
	answer := strings.TrimSpace(send.stdout.String())
	if len(answer) < 300 {
		t.Fatalf("answer %q; want the plodder's long streamed answer", answer)
	}
	line := "  [plodder] turn 1: " + answer
	if !strings.Contains(send.errText(), line+"\n") {
		t.Errorf("progress lacks the streamed line %q:\n%s", line, send.errText())
	}
	// --json prints what it printed before: the turn's record, no delta.
	js := startCLI(t, home, "sessions", "send", "--json", id, "stream again")
	if code := js.wait(t); code != 0 {
		t.Fatalf("troupe sessions send --json: exit %d; stderr:\n%s", code, js.errText())
	}
	var rec troupeclient.TurnRecord
	if err := json.Unmarshal([]byte(js.stdout.String()), &rec); err != nil || rec.Outcome == "" {
		t.Errorf("--json output %q (%v); want the turn's record", js.stdout.String(), err)
	}
	if strings.Contains(js.stdout.String()+js.errText(), troupe.EventTextDelta) || strings.Contains(js.errText(), "[plodder] turn") {
		t.Errorf("--json shows deltas or progress:\nstdout %s\nstderr %s", js.stdout.String(), js.errText())
	}
}

// followedEvents collects what a follower passes its fn, in order.
type followedEvents struct {
	mu  sync.Mutex
	evs []troupe.Event
}

func (f *followedEvents) add(e troupe.Event) {
	f.mu.Lock()
	f.evs = append(f.evs, e)
	f.mu.Unlock()
}

func (f *followedEvents) all() []troupe.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]troupe.Event(nil), f.evs...)
}

// waitFeed waits until a worker polling queue advertises a live feed,
// and returns its workflow id.
func waitFeed(t *testing.T, c client.Client, queue string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang detector
	for time.Now().Before(deadline) {
		d, err := c.DescribeTaskQueue(context.Background(), queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil {
			for _, p := range d.GetPollers() {
				if id, _ := troupe.LiveFeedOf(p.GetIdentity()); id != "" {
					return id
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no worker on %s advertised a live feed in a minute", queue)
	return ""
}

// startStream starts a run of the stream graph on queue; the returned
// channel gets its result's output (the answer) or its error.
func startStream(t *testing.T, c client.Client, queue, input string) (string, <-chan streamResult) {
	t.Helper()
	run, err := troupeclient.StartRun(context.Background(), c, queue, troupe.RunInput{Graph: "stream", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan streamResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var r troupe.RunResult
		err := run.Get(ctx, &r)
		var text string
		if err == nil {
			err = json.Unmarshal(r.Output, &text)
		}
		res <- streamResult{text, err}
	}()
	return run.GetID(), res
}

type streamResult struct {
	answer string
	err    error
}

// follow runs the followers until the run's result is in, then stops
// them, waits for their last readings, and returns the run's answer.
func follow(t *testing.T, run string, res <-chan streamResult, followers ...func(context.Context) error) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	errs := make(chan error, len(followers))
	for _, f := range followers {
		go func() { errs <- f(ctx) }()
	}
	r := <-res
	stop()
	for range followers {
		if err := <-errs; err != nil {
			t.Errorf("follower of %s: %v", run, err)
		}
	}
	if r.err != nil {
		t.Fatalf("run %s: %v", run, r.err)
	}
	return r.answer
}

// checkStreamed checks what a follower that asked for deltas got: several
// deltas of the streamer's first turn, numbered 0, adding up to the
// answer, all before the turn's model_turn event.
func checkStreamed(t *testing.T, evs []troupe.Event, run, answer string) {
	t.Helper()
	agentWF := run + "/0-streamer"
	turnAt := -1
	var text strings.Builder
	n := 0
	for i, e := range evs {
		switch {
		case e.Kind == troupe.EventTurn && e.WorkflowID == agentWF && e.Turn == 1:
			turnAt = i
		case e.Kind == troupe.EventTextDelta:
			n++
			if turnAt >= 0 {
				t.Errorf("delta %q after the turn's model_turn event", e.Detail)
			}
			if e.Seq != 0 || e.WorkflowID != agentWF || e.Agent != "streamer" || e.Turn != 1 {
				t.Errorf("delta %+v; want one of %s's turn 1, numbered 0", e, agentWF)
			}
			text.WriteString(e.Detail)
		}
	}
	if turnAt < 0 {
		t.Fatalf("the follower never got the turn's model_turn event; got %d events", len(evs))
	}
	if n < 10 || text.String() != answer || len(answer) < 300 {
		t.Errorf("%d deltas adding up to %q;\nwant at least 10 adding up to the answer %q", n, text.String(), answer)
	}
}

func countDeltas(evs []troupe.Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == troupe.EventTextDelta {
			n++
		}
	}
	return n
}

// checkNoDeltaRecorded checks that no workflow of the run recorded a
// delta: not among its events, not anywhere in its history.
func checkNoDeltaRecorded(t *testing.T, c client.Client, run string) {
	t.Helper()
	for _, e := range runEvents(t, c, run) {
		if e.Kind == troupe.EventTextDelta {
			t.Errorf("recorded event %+v is a delta", e)
		}
	}
	for _, id := range []string{run, run + "/0-streamer"} {
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		n := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			n++
			if strings.Contains(ev.String(), troupe.EventTextDelta) {
				t.Errorf("history event %d of %s holds a delta: %s", ev.GetEventId(), id, ev)
			}
		}
		if n == 0 {
			t.Errorf("no history for %s", id)
		}
	}
}

// historyShape is the count of each type of event in a workflow's
// history, but for workflow tasks (how many the server schedules depends
// on timing, not on what the workflow did).
func historyShape(t *testing.T, c client.Client, id string) string {
	t.Helper()
	counts := map[string]int{}
	var order []string
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		typ := ev.GetEventType().String()
		if strings.HasPrefix(typ, "WorkflowTask") {
			continue
		}
		if counts[typ] == 0 {
			order = append(order, typ)
		}
		counts[typ]++
	}
	var b strings.Builder
	for _, typ := range order {
		fmt.Fprintf(&b, "%s×%d ", typ, counts[typ])
	}
	return b.String()
}
