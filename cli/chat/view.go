package chat

// The view: a State as lines of a terminal of a given width. Plain text
// with lipgloss styles, which render as plain text where the output has no
// colours (tests, pipes).

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/troupe-dev/troupe/cli/spend"
	"github.com/troupe-dev/troupe/runtime"
)

var (
	styleTitle    = lipgloss.NewStyle().Bold(true)
	styleStatus   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))
	styleUser     = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("10"))
	styleAgent    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("13"))
	styleStep     = lipgloss.NewStyle().Faint(true)
	styleNote     = lipgloss.NewStyle().Foreground(lipgloss.Color("6"))
	styleProblem  = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	styleSelected = lipgloss.NewStyle().Reverse(true)
)

// maxIndent bounds the indentation of nested agents-as-tools, so deep
// trees stay readable on narrow terminals.
const maxIndent = 6

// Header is the line that says which session is open and where it
// stands, with what it spent: tokens, cost, and its budget's limits.
func (s *State) Header(width int) string {
	if s.Session == "" {
		return ansi.Truncate(styleTitle.Render("troupe chat")+" · no session open · /new [graph], /sessions, /help", width, "…")
	}
	in := s.Info
	status := in.Status
	if status == runtime.SessionThinking && len(s.Approvals) > 0 {
		// A call waits: the session says so once its root has taken the
		// request, which may be after the chat read it (the request's
		// event comes from the agent that asks, not from the root).
		status = runtime.SessionWaiting
	}
	parts := []string{styleTitle.Render("troupe chat"), describeInfo(in), "graph " + in.Graph, styleStatus.Render(string(status))}
	if in.Agent != "" {
		parts = append(parts, "next: "+in.Agent)
	}
	// What the session spent comes before its settings, which a narrow
	// terminal cuts first.
	parts = append(parts, fmt.Sprintf("%d %s", in.Turns, plural(in.Turns, "turn", "turns")), fmt.Sprintf("%d tokens", in.Usage.TotalTokens))
	if spent := spend.Brief(in.Cost, in.Budget); spent != "" {
		parts = append(parts, spent)
	}
	if spend.Spent(in.Budget) != "" {
		parts = append(parts, styleProblem.Render("budget spent"))
	}
	if in.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", in.Queued))
	}
	parts = append(parts, "policy "+string(in.Policy))
	var backends []string
	for _, sb := range in.Sandboxes {
		if sb.Backend != "" && !slices.Contains(backends, sb.Backend) {
			backends = append(backends, sb.Backend)
		}
	}
	if len(backends) > 0 {
		parts = append(parts, "sandboxes "+strings.Join(backends, ","))
	}
	return ansi.Truncate(strings.Join(parts, " · "), width, "…")
}

// Activity is the line that says what is going on: the agents at work,
// the calls the chat waits for, or how to get help.
func (s *State) Activity(width int) string {
	var parts []string
	if w := s.AtWork(); len(w) > 0 {
		parts = append(parts, "⋯ at work: "+strings.Join(w, ", "))
	}
	if w := s.Waiting(); len(w) > 0 {
		parts = append(parts, strings.Join(w, ", ")+"…")
	}
	if len(parts) == 0 {
		return styleStep.Render(ansi.Truncate("Enter sends · /help · PgUp/PgDn scroll · /done leaves (the session stays)", width, "…"))
	}
	return styleStatus.Render(ansi.Truncate(strings.Join(parts, " · "), width, "…"))
}

// PickerView is the list of sessions to choose from, when it is shown.
func (s *State) PickerView(width int) string {
	if !s.Picking {
		return ""
	}
	lines := []string{styleTitle.Render("sessions") + styleStep.Render(" · ↑/↓ choose · Enter opens · Esc closes")}
	for i, e := range s.Picker {
		name := e.Name
		if name == "" {
			name = "-"
		}
		line := fmt.Sprintf("%s  %s  %s  %s  %d %s  %s", e.ID, name, e.Graph, e.Status, e.Turns, plural(e.Turns, "turn", "turns"),
			e.LastActivity.Local().Format(time.DateTime))
		line = ansi.Truncate("  "+line, width, "…")
		if i == s.Pick {
			line = styleSelected.Render(ansi.Truncate("› "+strings.TrimPrefix(line, "  "), width, "…"))
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// RenderEntry renders one entry of the transcript as lines of at most
// width columns.
func RenderEntry(e Entry, width int) string {
	indent := strings.Repeat("  ", min(e.Depth, maxIndent))
	width = max(width-len(indent), 20)
	var out string
	switch e.Kind {
	case KindUser:
		out = hanging(styleUser.Render("you › "), e.Text, width)
	case KindReply, KindAnswer:
		text := e.Text
		if e.Streaming {
			text += " ▍"
		}
		head := styleAgent.Render(e.Agent + " › ")
		if strings.Contains(strings.TrimRight(text, "\n"), "\n") {
			out = styleAgent.Render(e.Agent+" ›") + "\n" + block("  ", text, width)
		} else {
			out = hanging(head, text, width)
		}
	case KindStep:
		out = styleStep.Render(ansi.Truncate(oneLine(e.Text), width, "…"))
	case KindNote:
		out = styleNote.Render(hanging("· ", e.Text, width))
	case KindProblem:
		out = styleProblem.Render(hanging("✗ ", e.Text, width))
	case KindHelp:
		out = block("", e.Text, width)
	}
	if indent == "" {
		return out
	}
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
}

// Render renders the transcript, each entry after a blank line but the
// steps of a turn, which go together.
func Render(entries []Entry, width int) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString("\n")
			if e.Kind != KindStep || entries[i-1].Kind != KindStep {
				b.WriteString("\n")
			}
		}
		b.WriteString(RenderEntry(e, width))
	}
	return b.String()
}

// hanging wraps text after head, its next lines indented as far.
func hanging(head, text string, width int) string {
	pad := ansi.StringWidth(head)
	lines := strings.Split(ansi.Wrap(text, max(width-pad, 10), ""), "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = head + lines[i]
		} else {
			lines[i] = strings.Repeat(" ", pad) + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// block wraps each line of text, indented by indent.
func block(indent, text string, width int) string {
	lines := strings.Split(ansi.Wrap(strings.TrimRight(text, "\n"), max(width-len(indent), 10), ""), "\n")
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
