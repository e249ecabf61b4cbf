package chat

import (
	"errors"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/model"
)

func TestRenderEntry(t *testing.T) {
	tests := []struct {
		name  string
		entry Entry
		width int
		want  []string
	}{
		{"user", Entry{Kind: KindUser, Text: "review the deal"}, 40, []string{"you › review the deal"}},
		{"user wraps under itself", Entry{Kind: KindUser, Text: "one two three four five six"}, 20,
			[]string{"you › one two three", "      four five six"}},
		{"step of a child", Entry{Kind: KindStep, Depth: 2, Text: "pricing_reviewer → exec_command {}"}, 80,
			[]string{"    pricing_reviewer → exec_command {}"}},
		{"step cut to one line", Entry{Kind: KindStep, Depth: 1, Text: "a ← tool: line one\nline two " + strings.Repeat("z", 50)}, 30,
			[]string{"  a ← tool: line one line two…"}},
		{"deep steps stop moving right", Entry{Kind: KindStep, Depth: 9, Text: "x"}, 80, []string{strings.Repeat("  ", maxIndent) + "x"}},
		{"streaming reply", Entry{Kind: KindReply, Agent: "helper", Depth: 1, Text: "Hel", Streaming: true}, 40, []string{"  helper › Hel ▍"}},
		{"answer of lines", Entry{Kind: KindAnswer, Agent: "coordinator", Text: "{\n  \"a\": 1\n}"}, 40,
			[]string{"coordinator ›", "  {", "    \"a\": 1", "  }"}},
		{"note", Entry{Kind: KindNote, Text: "paused"}, 40, []string{"· paused"}},
		{"problem", Entry{Kind: KindProblem, Text: "session x is stopped"}, 40, []string{"✗ session x is stopped"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Split(ansi.Strip(RenderEntry(tc.entry, tc.width)), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, line := range got {
				if w := ansi.StringWidth(line); w > tc.width {
					t.Errorf("line %q is %d wide, more than %d", line, w, tc.width)
				}
			}
		})
	}
}

func TestHeader(t *testing.T) {
	s := NewState(Options{})
	if got := ansi.Strip(s.Header(100)); !strings.Contains(got, "no session open") {
		t.Errorf("header %q", got)
	}
	s.Apply(Opened{Info: troupeclient.SessionInfo{ID: sid, Name: "acme", Graph: "dealdesk", Status: runtime.SessionPaused, Agent: "coordinator",
		Policy: runtime.PolicyReject, Turns: 1, Usage: model.Usage{TotalTokens: 4940}, Queued: 2,
		Sandboxes: []troupe.SessionSandbox{{Agent: "pricing_reviewer", Backend: "bwrap"}, {Agent: "rollout_reviewer", Backend: "bwrap"}}}})
	want := "troupe chat · session-dealdesk-1 (acme) · graph dealdesk · paused · next: coordinator · 1 turn · 4940 tokens · 2 queued · policy reject · sandboxes bwrap"
	if got := ansi.Strip(s.Header(200)); got != want {
		t.Errorf("header\n%q\nwant\n%q", got, want)
	}
	if got := ansi.Strip(s.Header(40)); ansi.StringWidth(got) > 40 || !strings.HasSuffix(got, "…") {
		t.Errorf("narrow header %q", got)
	}
}

func TestPickerView(t *testing.T) {
	s := opened(t, troupeclient.SessionInfo{})
	if s.PickerView(80) != "" {
		t.Error("a picker shows before /sessions")
	}
	s.Apply(Listed{Sessions: []troupeclient.SessionEntry{{ID: "a", Graph: "dealdesk", Status: runtime.SessionIdle}, {ID: sid, Name: "acme", Graph: "dealdesk", Status: runtime.SessionPaused, Turns: 3}}})
	lines := strings.Split(ansi.Strip(s.PickerView(80)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "  a  -  dealdesk  idle  0 turns") || !strings.HasPrefix(lines[2], "› "+sid+"  acme  dealdesk  paused  3 turns") {
		t.Errorf("picker\n%s", strings.Join(lines, "\n"))
	}
}

// The UI turns keys into the state's messages and its effects into the
// caller's commands.
func TestUI(t *testing.T) {
	var done []Effect
	do := func(e Effect) tea.Cmd {
		done = append(done, e)
		return nil
	}
	u := New(NewState(Options{Graph: "dealdesk"}), do, Effect{Do: DoCheckServed})
	u.Init()
	if !slices.EqualFunc(done, []Effect{{Do: DoCheckServed}}, sameEffect) {
		t.Errorf("start effects %+v", done)
	}
	u.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	done = nil
	for _, r := range "/new" {
		u.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	u.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if want := []Effect{{Do: DoCreate, Arg: "dealdesk"}, {Do: DoCheckServed}}; !slices.EqualFunc(done, want, sameEffect) {
		t.Errorf("effects of /new %+v, want %+v", done, want)
	}
	if !strings.Contains(ansi.Strip(u.View()), "creating a session…") {
		t.Errorf("view while creating:\n%s", ansi.Strip(u.View()))
	}
	done = nil
	u.Update(Created{Entry: troupeclient.SessionEntry{ID: sid}})
	u.Update(Opened{Info: troupeclient.SessionInfo{ID: sid, Graph: "dealdesk", Status: runtime.SessionIdle, Agent: "triage", NextEvent: 2}})
	if want := []Effect{{Do: DoOpen, Session: sid}, {Do: DoCheckServed}, {Do: DoFollow, Session: sid, Cursor: troupeclient.Cursor{sid: 1}}}; !slices.EqualFunc(done, want, sameEffect) {
		t.Errorf("effects %+v, want %+v", done, want)
	}
	view := ansi.Strip(u.View())
	lines := strings.Split(view, "\n")
	if len(lines) != 30 || !strings.Contains(lines[0], sid) || !strings.Contains(lines[0], "idle") || !strings.HasPrefix(lines[len(lines)-1], "› ") {
		t.Errorf("view of %d lines:\n%s", len(lines), view)
	}
	// The list of sessions takes the arrows while it shows.
	u.Update(Listed{Sessions: []troupeclient.SessionEntry{{ID: "a"}, {ID: sid}}})
	u.Update(tea.KeyMsg{Type: tea.KeyUp})
	done = nil
	u.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if want := []Effect{{Do: DoOpen, Session: "a"}, {Do: DoCheckServed}}; !slices.EqualFunc(done, want, sameEffect) {
		t.Errorf("effects of the pick %+v, want %+v", done, want)
	}
	if n := len(strings.Split(ansi.Strip(u.View()), "\n")); n != 30 {
		t.Errorf("view of %d lines after the list closed, want 30", n)
	}
	// Ctrl-C leaves as /done does.
	_, cmd := u.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if !u.State().Quit || cmd == nil {
		t.Fatalf("Ctrl-C: quit %v, cmd %v", u.State().Quit, cmd)
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Errorf("Ctrl-C's command is not tea.Quit")
	}
}

// While a call waits, y, n or a pressed on an empty input line decides
// the oldest at once; typed after other letters, or with nothing
// waiting, they are letters of a message.
func TestUIAnswersWithOneKey(t *testing.T) {
	var done []Effect
	do := func(e Effect) tea.Cmd {
		done = append(done, e)
		return nil
	}
	press := func(u *UI, keys string) {
		for _, r := range keys {
			u.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		}
	}
	asked := withTool(ev(pricing, troupe.EventApprovalRequested, "pricing_reviewer", 1, `{"cmd":"make"}`), "exec_command")
	asked.Approval = "a1"
	for _, tc := range []struct {
		key  string
		want troupeclient.Decision
	}{
		{"y", troupeclient.Decision{ID: "a1", Approve: true}},
		{"N", troupeclient.Decision{ID: "a1"}},
		{"a", troupeclient.Decision{ID: "a1", Approve: true, Remember: runtime.RememberTool}},
	} {
		u := New(opened(t, troupeclient.SessionInfo{}), do)
		u.Update(Followed{Session: sid, Event: asked})
		done = nil
		press(u, tc.key)
		if len(done) != 1 || done[0].Do != DoDecide || done[0].Decision != tc.want {
			t.Errorf("%q pressed: effects %+v, want the decision %+v", tc.key, done, tc.want)
		}
		if u.input.Value() != "" {
			t.Errorf("%q pressed: the input line holds %q", tc.key, u.input.Value())
		}
	}
	u := New(opened(t, troupeclient.SessionInfo{}), do)
	u.Update(Followed{Session: sid, Event: asked})
	done = nil
	press(u, "yay")
	if len(done) != 1 || done[0].Do != DoDecide {
		t.Fatalf("effects %+v, want the first y to decide", done)
	}
	// While the decision is on its way the keys are letters.
	if got := u.input.Value(); got != "ay" {
		t.Errorf("after the decision the letters typed are %q, want %q", got, "ay")
	}
	// A decision that failed leaves the call waiting, and a key decides
	// it again.
	u.Update(Failed{Do: DoDecide, Session: sid, Err: errors.New("not taken")})
	u.input.Reset()
	done = nil
	press(u, "n")
	if len(done) != 1 || done[0].Do != DoDecide || done[0].Decision != (troupeclient.Decision{ID: "a1"}) {
		t.Errorf("n after a failed decision: effects %+v", done)
	}
	// With nothing waiting, y is a letter.
	u = New(opened(t, troupeclient.SessionInfo{}), do)
	done = nil
	press(u, "y")
	if len(done) != 0 || u.input.Value() != "y" {
		t.Errorf("y with nothing waiting: effects %+v, input %q", done, u.input.Value())
	}
}
