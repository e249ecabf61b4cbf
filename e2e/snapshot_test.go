package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows"
)

// makeSparse writes, in the workspace, a sparse file of 65,537 data runs
// (a byte every 8 KiB): one more than a snapshot archives, so every
// snapshot of the workspace fails until the file is deleted.
const makeSparse = `python3 -c "f = open('sparse', 'wb'); [(f.seek(i * 8192), f.write(b'x')) for i in range(65537)]"`

// A session whose workspace holds a file no snapshot takes, on a real
// server and sandbox: the turn's files survive a pause, a switch and the
// idle suspension, each of which fails (the first two with
// troupe.SnapshotFailed, the last trying again later) and stops nothing;
// once the file is deleted all three go through, and the files are there
// after the switch. With -histories, the session's, its agents' and its
// manager's histories are saved for the replay tests
// (v13-snapshot-refused).
func TestSessionSnapshotRefusedKeepsFiles(t *testing.T) {
	parallel(t)
	cl, _, c := sessionClient(t, "local", func(cfg *workflows.Config) { cfg.SandboxIdleTimeout = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: "notes"}, troupeclient.WithID(fmt.Sprintf("snapshot-refused-%d", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{s.ID(): true}
	follow := func(e troupeclient.Event) { ids[e.WorkflowID] = true }
	ask := func(msg, want string) {
		t.Helper()
		rec, err := s.Ask(ctx, msg, follow)
		if err != nil || rec.Outcome != runtime.TurnAnswered || string(rec.Output) != want {
			t.Fatalf("%q: %+v, %v; want answered %s", msg, rec, err, want)
		}
	}
	command := func(op, arg string) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: s.ID(), UpdateName: troupe.CommandUpdate,
			WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{troupe.SessionCommand{Op: op, Arg: arg}}})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	ask("run: "+makeSparse+" && echo kept > notes.txt && echo made", `"made\n"`)
	// The pause through the manager (as troupe sessions pause), the
	// switch through the session's own update.
	_, err = s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandPause})
	if troupe.ErrorType(err) != troupe.ErrSnapshotFailed || !strings.Contains(err.Error(), `"sparse"`) {
		t.Fatalf("pause with a file the snapshot refuses: %v; want %s naming it", err, troupe.ErrSnapshotFailed)
	}
	if err := command(troupe.CommandSwitch, "local"); troupe.ErrorType(err) != troupe.ErrSnapshotFailed || !strings.Contains(err.Error(), `"sparse"`) {
		t.Fatalf("switch with a file the snapshot refuses: %v; want %s naming it", err, troupe.ErrSnapshotFailed)
	}
	// The idle suspension fails too, and says it tries again.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		// A session busy in a workflow task answers its query late on a
		// loaded machine: read with patience, as a whole reading wants.
		evs, err := troupeclient.Events(ctx, c, s.ID(), troupeclient.WithPatience(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Kind == troupe.EventSandboxSnapshotFailed && strings.HasPrefix(e.Detail, "idle suspension") && strings.Contains(e.Detail, "tried again in") {
				n++
			}
			if e.Kind == troupe.EventSandboxSuspended {
				t.Fatalf("the sandbox was suspended with a file its snapshot refuses: %s", e.Detail)
			}
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two idle suspensions failed and said they try again, in a minute of 2 s idle timeouts: %+v", evs)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != runtime.SessionIdle || len(info.Sandboxes) != 1 || info.Sandboxes[0].ID == "" {
		t.Fatalf("after the failures: %s, sandboxes %+v; want idle, the sandbox live", info.Status, info.Sandboxes)
	}
	ask("run: cat notes.txt && rm -f sparse", `"kept\n"`)
	for _, cmd := range []troupeclient.SessionCommand{{Op: troupe.CommandPause}, {Op: troupe.CommandResume}, {Op: troupe.CommandSwitch, Arg: "local"}} {
		if _, err := s.Command(ctx, cmd); err != nil {
			t.Fatalf("%s once the file is deleted: %v", cmd.Op, err)
		}
	}
	if err := command(troupe.CommandSwitch, "local"); err != nil {
		t.Fatalf("switch once the file is deleted, through the session's update: %v", err)
	}
	ask("run: cat notes.txt; ls", `"kept\nnotes.txt\n"`)
	if _, err := s.Command(ctx, troupeclient.SessionCommand{Op: troupe.CommandStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if *historiesDir != "" {
		saveHistories(t, c, ids, *historiesDir, "snapshot-refused")
		saveHistories(t, c, map[string]bool{troupe.SessionManagerIDFor(cl.TaskQueue()): true}, *historiesDir, "snapshot-refused-manager")
	}
}
