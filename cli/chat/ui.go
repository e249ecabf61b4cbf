package chat

// UI is the Bubble Tea program over a State: keys become messages,
// effects become commands (run by the caller's Do), and the view is the
// header, the transcript in a scrolling viewport, the list of sessions
// when it is shown, what is going on, and the input line.

import (
	"strings"

	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
)

// UI is the chat's Bubble Tea model.
type UI struct {
	st    *State
	do    func(Effect) tea.Cmd
	start []Effect
	input textinput.Model
	view  viewport.Model
	// width and height are the terminal's.
	width, height int
	// rendered caches each entry's lines, by entry and width: a streamed
	// fragment renders one entry again, not the transcript.
	rendered []renderedEntry
}

type renderedEntry struct {
	e     Entry
	width int
	text  string
}

// New returns the UI over st. do runs an effect as a command whose
// message, if any, is the effect's outcome (a Msg); DoQuit never reaches
// it. start are the effects to run first.
func New(st *State, do func(Effect) tea.Cmd, start ...Effect) *UI {
	in := textinput.New()
	in.Prompt = "› "
	in.Placeholder = "a message, or /help"
	in.CharLimit = 0
	in.Focus()
	u := &UI{st: st, do: do, start: start, input: in, view: viewport.New(80, 20), width: 80, height: 24}
	u.view.KeyMap = viewport.KeyMap{} // the keys are the input line's; PgUp/PgDn scroll (Update)
	return u
}

// State returns the UI's state.
func (u *UI) State() *State { return u.st }

// Init runs the start effects.
func (u *UI) Init() tea.Cmd { return tea.Batch(textinput.Blink, u.run(u.start)) }

// Update takes a key, a window size, or a Msg.
func (u *UI) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch m := msg.(type) {
	case tea.WindowSizeMsg:
		u.width, u.height = m.Width, m.Height
		u.layout()
		return u, nil
	case tea.KeyMsg:
		switch m.Type {
		case tea.KeyCtrlC, tea.KeyCtrlD:
			return u, u.apply(Line{Text: "/done"})
		case tea.KeyEnter:
			text := u.input.Value()
			u.input.Reset()
			return u, u.apply(Line{Text: text})
		case tea.KeyUp, tea.KeyDown:
			if u.st.Picking {
				return u, u.apply(Key{Name: strings.ToLower(m.Type.String())})
			}
			if m.Type == tea.KeyUp {
				u.view.ScrollUp(1)
			} else {
				u.view.ScrollDown(1)
			}
			return u, nil
		case tea.KeyRunes:
			// y, n or a on an empty input line answers the oldest call
			// that waits at once, without Enter; typed after anything
			// else, they are letters of a message.
			if u.input.Value() == "" && len(m.Runes) == 1 && u.st.takesKeys() {
				if _, ok := approvalAnswers[strings.ToLower(string(m.Runes))]; ok {
					return u, u.apply(Line{Text: string(m.Runes)})
				}
			}
		case tea.KeyEsc:
			return u, u.apply(Key{Name: "esc"})
		case tea.KeyPgUp:
			u.view.PageUp()
			return u, nil
		case tea.KeyPgDown:
			u.view.PageDown()
			return u, nil
		}
	case Msg:
		return u, u.apply(m)
	}
	var cmd tea.Cmd
	u.input, cmd = u.input.Update(msg)
	return u, cmd
}

// apply applies m to the state, shows the outcome, and runs its effects.
func (u *UI) apply(m Msg) tea.Cmd {
	effects := u.st.Apply(m)
	u.layout()
	return u.run(effects)
}

func (u *UI) run(effects []Effect) tea.Cmd {
	var cmds []tea.Cmd
	for _, e := range effects {
		if e.Do == DoQuit {
			cmds = append(cmds, tea.Quit)
			continue
		}
		cmds = append(cmds, u.do(e))
	}
	return tea.Batch(cmds...)
}

// chrome counts the lines around the transcript: header, rule, picker,
// activity, input.
func (u *UI) chrome() int {
	n := 4
	if p := u.st.PickerView(u.width); p != "" {
		n += strings.Count(p, "\n") + 1
	}
	return n
}

// layout sizes the viewport for the terminal and renders the transcript
// into it, staying at the bottom if it was there.
func (u *UI) layout() {
	bottom := u.view.AtBottom()
	u.view.Width = u.width
	u.view.Height = max(u.height-u.chrome(), 3)
	u.input.Width = max(u.width-3, 10)
	u.view.SetContent(u.transcript())
	if bottom {
		u.view.GotoBottom()
	}
}

// transcript renders the entries, again only those that changed.
func (u *UI) transcript() string {
	es := u.st.Entries
	if len(u.rendered) > len(es) {
		u.rendered = u.rendered[:0]
	}
	var b strings.Builder
	for i, e := range es {
		if i == len(u.rendered) {
			u.rendered = append(u.rendered, renderedEntry{})
		}
		r := &u.rendered[i]
		if r.e != e || r.width != u.width || r.text == "" {
			*r = renderedEntry{e: e, width: u.width, text: RenderEntry(e, u.width)}
		}
		if i > 0 {
			b.WriteString("\n")
			if e.Kind != KindStep || es[i-1].Kind != KindStep {
				b.WriteString("\n")
			}
		}
		b.WriteString(r.text)
	}
	return b.String()
}

// View draws the chat.
func (u *UI) View() string {
	parts := []string{u.st.Header(u.width), styleStep.Render(strings.Repeat("─", max(u.width, 1))), u.view.View()}
	if p := u.st.PickerView(u.width); p != "" {
		parts = append(parts, p)
	}
	parts = append(parts, u.st.Activity(u.width), u.input.View())
	return strings.Join(parts, "\n")
}
