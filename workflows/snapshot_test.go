package workflows_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/workflowstest"
)

// makeSparse writes, in the workspace, a sparse file of 65,537 data runs
// (a byte every 8 KiB): one more than a snapshot archives (the host's
// bound on the runs it seeks), so every snapshot of the workspace fails
// until the file is deleted.
const makeSparse = `python3 -c "
f = open('sparse', 'wb')
for i in range(65537):
    f.seek(i * 8192); f.write(b'x')
"`

// sparseTimeout bounds, in real time, a test that makes sparse files of
// makeSparse's (256 MiB on disk each) and snapshots them: over the test
// environment's 3 s on a loaded machine.
const sparseTimeout = 2 * time.Minute

// A snapshot that fails stops no sandbox: the turn's files stay in the
// live workspace, a pause and a switch fail with troupe.SnapshotFailed
// (nothing paused, nothing switched), the idle suspension says it will
// try again and does, later each time; once the user deletes the file
// that the snapshot refused, the pause and the switch go through and the
// next turn, restored on the other backend, finds the files.
func TestSessionSnapshotRefused(t *testing.T) {
	other := t.TempDir()
	env, root := sessionSandboxEnv(t, workflowstest.ScriptedCoder, func(c *workflows.Config) {
		oc, err := local.New(local.Config{Root: other})
		if err != nil {
			t.Fatal(err)
		}
		c.Sandboxes["other"] = oc
	})
	env.SetTestTimeout(sparseTimeout)
	var made, deleted, restored *workflowstest.Update
	var pause, sw, pause2, resume, sw2 *workflowstest.Update
	var afterFail, idle, afterFix troupe.SessionInfo
	var filesAfterFail, filesIdle []string
	var idleEvents []troupe.Event
	notes := func() []string {
		m, _ := filepath.Glob(filepath.Join(root, "*", "notes.txt"))
		return m
	}
	env.RegisterDelayedCallback(func() {
		made = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: " + makeSparse + " && echo kept > notes.txt && echo made", Wait: true})
	}, time.Second)
	// (a) The pause needs a snapshot, which fails.
	env.RegisterDelayedCallback(func() {
		pause = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandPause})
	}, time.Minute)
	// (b) So does the switch.
	env.RegisterDelayedCallback(func() {
		afterFail, filesAfterFail = workflowstest.SessionInfo(t, env), notes()
		sw = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandSwitch, Arg: "other"})
	}, 2*time.Minute)
	// (c) The idle timer fires at 7 minutes (5 after the switch), and
	// after each failure tries again later: at 12, then 22 minutes.
	env.RegisterDelayedCallback(func() {
		idle, filesIdle = workflowstest.SessionInfo(t, env), notes()
		idleEvents = workflowstest.Recorded(t, env, 0)
	}, 20*time.Minute)
	// (d) The user deletes the file; the pause and the switch go through.
	env.RegisterDelayedCallback(func() {
		deleted = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: rm -f sparse && echo deleted", Wait: true})
	}, 21*time.Minute)
	env.RegisterDelayedCallback(func() {
		pause2 = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandPause})
	}, 22*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterFix = workflowstest.SessionInfo(t, env)
		resume = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandResume})
		sw2 = workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandSwitch, Arg: "other"})
	}, 23*time.Minute)
	env.RegisterDelayedCallback(func() {
		restored = workflowstest.SendUpdate(env, troupe.SendUpdate, troupe.SendInput{Message: "run: cat notes.txt; ls", Wait: true})
	}, 24*time.Minute)
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CommandUpdate, troupe.SessionCommand{Op: troupe.CommandStop})
	}, 25*time.Minute)
	env.ExecuteWorkflow(troupe.SessionWorkflowName, troupe.SessionInput{Graph: "code"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}

	if got := made.Output(t); got != `"out: made"` {
		t.Fatalf("the turn that made the sparse file answered %s", got)
	}
	// The end of the turn said its snapshot failed, in the agent's events.
	var turnEvent string
	for _, e := range workflowstest.RecordedBy(t, env, "default-test-workflow-id/t1/0-coder") {
		if e.Kind == troupe.EventSandboxSnapshotFailed {
			turnEvent = e.Detail
		}
	}
	if !strings.Contains(turnEvent, "after the turn") || !strings.Contains(turnEvent, "65536 data runs") {
		t.Errorf("the turn's snapshot_failed event: %q; want it to say the turn's snapshot failed on the sparse file", turnEvent)
	}

	// (a) and (b): typed errors that say why and what to do; nothing
	// paused, nothing switched; the sandbox up with its files.
	for _, c := range []struct {
		name string
		u    *workflowstest.Update
	}{{"pause", pause}, {"switch", sw}} {
		err := c.u.Err()
		if troupe.ErrorType(err) != troupe.ErrSnapshotFailed {
			t.Errorf("%s with a file the snapshot refuses: err %v, want %s", c.name, err, troupe.ErrSnapshotFailed)
			continue
		}
		for _, want := range []string{`"sparse"`, "65536 data runs", "stays up", "Delete that file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s's error %q does not say %q", c.name, err, want)
			}
		}
	}
	live := func(info troupe.SessionInfo) bool {
		return len(info.Sandboxes) == 1 && info.Sandboxes[0].ID != "" && info.Sandboxes[0].State == runtime.LeaseIdle
	}
	if afterFail.Status != runtime.SessionIdle || !live(afterFail) || len(filesAfterFail) != 1 {
		t.Errorf("after the failed pause: status %s, sandboxes %+v, notes %v; want idle, the sandbox live with notes.txt", afterFail.Status, afterFail.Sandboxes, filesAfterFail)
	}

	// (c) The idle suspension failed, said so and that it tries again,
	// and did; the sandbox stayed up, on the backend it was on.
	var retries []string
	for _, e := range idleEvents {
		if e.Kind == troupe.EventSandboxSnapshotFailed && strings.HasPrefix(e.Detail, "idle suspension") {
			retries = append(retries, e.Detail)
		}
	}
	if len(retries) != 2 || !strings.Contains(retries[0], "tried again in 5m0s") || !strings.Contains(retries[1], "tried again in 10m0s") {
		t.Errorf("idle suspension events by 20 minutes: %q; want two, at 7 and 12 minutes, trying again in 5 then 10 minutes", retries)
	}
	if workflowstest.Kinds(idleEvents)[troupe.EventSandboxSuspended] != 0 || !live(idle) || idle.Backend != "" || len(filesIdle) != 1 {
		t.Errorf("after 20 idle minutes: sandboxes %+v, backend %q, notes %v; want the sandbox live on the default backend with notes.txt", idle.Sandboxes, idle.Backend, filesIdle)
	}

	// (d) Once the file is gone, all goes through, and the files are
	// there.
	if got := deleted.Output(t); got != `"out: deleted"` {
		t.Errorf("the turn that deleted the file answered %s", got)
	}
	for name, u := range map[string]*workflowstest.Update{"pause": pause2, "resume": resume, "switch": sw2} {
		if u.Err() != nil || !u.Done() {
			t.Errorf("%s after the file was deleted: done %v, err %v", name, u.Done(), u.Err())
		}
	}
	if len(afterFix.Sandboxes) != 1 || afterFix.Sandboxes[0].State != runtime.LeaseSuspended || afterFix.Status != runtime.SessionPaused {
		t.Errorf("paused after the fix: status %s, sandboxes %+v; want paused, its sandbox suspended", afterFix.Status, afterFix.Sandboxes)
	}
	if got := restored.Output(t); got != `"out: kept\nnotes.txt"` {
		t.Errorf("the turn after the switch reads %s, want notes.txt as the first turn wrote it", got)
	}
	if m, _ := filepath.Glob(filepath.Join(other, "*")); len(m) != 0 {
		t.Errorf("the other backend's root holds %v after the session stopped", m)
	}
	if left := workflowstest.Leftovers(t, root); len(dirs(left)) != 0 {
		t.Errorf("workspaces left after the session stopped: %v", left)
	}
}

// A fork needs a fresh snapshot of each workspace: one that fails fails
// the fork with troupe.SnapshotFailed, makes no fork and leaves the
// source's sandbox up with its files; once the file is deleted, the fork
// is made and finds them.
func TestSessionForkSnapshotRefused(t *testing.T) {
	env, root, _, _ := managerWithCode(t)
	env.SetTestTimeout(sparseTimeout)
	var made, deleted, forkTurn *workflowstest.Update
	var refused, forked *workflowstest.Update
	var listed []troupe.SessionEntry
	var filesAfter []string
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		made = workflowstest.AskSession(t, env, "src", "run: "+makeSparse+" && echo kept > notes.txt && echo made")
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		refused = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "refused"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		listed = sessionsNow(t, env)
		filesAfter, _ = filepath.Glob(filepath.Join(root, "*", "notes.txt"))
		deleted = workflowstest.AskSession(t, env, "src", "run: rm -f sparse && echo deleted")
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		forked = workflowstest.SendUpdate(env, troupe.ForkUpdate, troupe.ForkInput{ID: "src", NewID: "branch"})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() { forkTurn = workflowstest.AskSession(t, env, "branch", "run: cat notes.txt") }, 4*time.Minute)
	env.RegisterDelayedCallback(func() {
		for _, id := range []string{"src", "branch"} {
			workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: id, Command: troupe.SessionCommand{Op: troupe.CommandStop}})
		}
	}, time.Hour)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	if got := made.Output(t); got != `"out: made"` {
		t.Fatalf("the turn that made the sparse file answered %s", got)
	}
	if err := refused.Err(); troupe.ErrorType(err) != troupe.ErrSnapshotFailed || !strings.Contains(err.Error(), `"sparse"`) || !strings.Contains(err.Error(), "Delete that file") {
		t.Errorf("fork with a file the snapshot refuses: %v; want %s saying which file and what to do", err, troupe.ErrSnapshotFailed)
	}
	for _, e := range listed {
		if e.ID == "refused" {
			t.Errorf("the manager lists the fork that failed: %+v", e)
		}
	}
	if len(filesAfter) != 1 {
		t.Errorf("after the failed fork the source's live workspaces hold notes.txt at %v; want one", filesAfter)
	}
	if got := deleted.Output(t); got != `"out: deleted"` {
		t.Errorf("the turn that deleted the file answered %s", got)
	}
	if forked.Err() != nil {
		t.Fatalf("fork once the file is gone: %v", forked.Err())
	}
	if got := forkTurn.Output(t); got != `"out: kept"` {
		t.Errorf("the fork's first turn reads %s, want notes.txt as the source wrote it", got)
	}
}

// Through the manager (what troupe sessions and client.Session.Command
// use), a pause and a switch whose snapshots fail fail for their caller
// with troupe.SnapshotFailed, and the registry does not take them as
// done; once the file is deleted both go through.
func TestManagerCommandSnapshotRefused(t *testing.T) {
	env, _, _, _ := managerWithCode(t)
	env.SetTestTimeout(sparseTimeout)
	var made, deleted, restored *workflowstest.Update
	var pause, sw, pause2, resume, sw2 *workflowstest.Update
	var listed []troupe.SessionEntry
	lifecycle := func(op, arg string) *workflowstest.Update {
		return workflowstest.SendUpdate(env, troupe.LifecycleUpdate, troupe.LifecycleInput{ID: "src", Command: troupe.SessionCommand{Op: op, Arg: arg}})
	}
	env.RegisterDelayedCallback(func() {
		workflowstest.SendUpdate(env, troupe.CreateSessionUpdate, troupe.CreateSessionInput{ID: "src", Session: troupe.SessionInput{Graph: "code"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		made = workflowstest.AskSession(t, env, "src", "run: "+makeSparse+" && echo kept > notes.txt && echo made")
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { pause = lifecycle(troupe.CommandPause, "") }, time.Minute)
	env.RegisterDelayedCallback(func() { sw = lifecycle(troupe.CommandSwitch, "other") }, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		listed = sessionsNow(t, env)
		deleted = workflowstest.AskSession(t, env, "src", "run: rm -f sparse && echo deleted")
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() { pause2 = lifecycle(troupe.CommandPause, "") }, 4*time.Minute)
	env.RegisterDelayedCallback(func() { resume = lifecycle(troupe.CommandResume, "") }, 5*time.Minute)
	env.RegisterDelayedCallback(func() { sw2 = lifecycle(troupe.CommandSwitch, "other") }, 6*time.Minute)
	env.RegisterDelayedCallback(func() { restored = workflowstest.AskSession(t, env, "src", "run: cat notes.txt") }, 7*time.Minute)
	env.RegisterDelayedCallback(func() { lifecycle(troupe.CommandStop, "") }, time.Hour)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
	env.ExecuteWorkflow(troupe.SessionManagerWorkflowName, troupe.ManagerInput{})

	if got := made.Output(t); got != `"out: made"` {
		t.Fatalf("the turn that made the sparse file answered %s", got)
	}
	for name, u := range map[string]*workflowstest.Update{"pause": pause, "switch": sw} {
		if err := u.Err(); troupe.ErrorType(err) != troupe.ErrSnapshotFailed || !strings.Contains(err.Error(), `"sparse"`) || !strings.Contains(err.Error(), "Delete that file") {
			t.Errorf("%s through the manager, with a file the snapshot refuses: %v; want %s saying which file and what to do", name, err, troupe.ErrSnapshotFailed)
		}
	}
	for _, e := range listed {
		if e.ID == "src" && (e.Status != runtime.SessionIdle || slices.Contains(e.Backends, "other")) {
			t.Errorf("the registry after the failed pause and switch: %+v; want src idle, not on other", e)
		}
	}
	if got := deleted.Output(t); got != `"out: deleted"` {
		t.Errorf("the turn that deleted the file answered %s", got)
	}
	for name, u := range map[string]*workflowstest.Update{"pause": pause2, "resume": resume, "switch": sw2} {
		if u.Err() != nil || !u.Done() {
			t.Errorf("%s once the file is deleted: done %v, err %v", name, u.Done(), u.Err())
		}
	}
	if got := restored.Output(t); got != `"out: kept"` {
		t.Errorf("the turn after the switch reads %s, want notes.txt as the first turn wrote it", got)
	}
}
