package bench

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/troupe-dev/troupe/cli/chat"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/workflows/events"
)

// BenchmarkChatTimeToFirstToken measures time to first token on the
// screen of `troupe chat`: the chat's own UI and runner (package
// cli/chat) in a Bubble Tea program whose terminal is a writer, opened on
// a session of the streamer (the scripted model thinks streamThinkMS,
// then streams about 2 KB), as a user on another process than the worker
// sees it: the deltas come through the worker's live feed. Each message is
// timed from the moment the program takes it (the Enter key) to the
// first write to the terminal of a frame that shows the reply's first
// piece, against the scripted server's own time to first token measured
// just before by an HTTP client.
//
// Reported: model-ttft-p50-ms, chat-ttft-p50-ms, chat-ttft-p95-ms and
// chat-ttft-p50-ratio, the one over the other.
func BenchmarkChatTimeToFirstToken(b *testing.B) {
	c := temporalClient(b)
	_, url := modelServer(b)
	queue := streamWorker(b, c, url, events.NewBus()) // the chat, as in another process, reads the live feed
	cl, err := troupeclient.New(troupeclient.Config{Temporal: c, TaskQueue: queue})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _, err := cl.CreateSession(ctx, troupeclient.SessionInput{Graph: graphName, Agent: "streamer"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Ask(ctx, "warm up", nil); err != nil {
		b.Fatal(err)
	}
	scr := &screen{}
	runner := chat.NewRunner(ctx, cl, nil)
	scr.ui = chat.New(chat.NewState(chat.Options{}), runner.Do, chat.Effect{Do: chat.DoOpen, Session: s.ID()})
	p := tea.NewProgram(scr, tea.WithContext(ctx), tea.WithInput(nil), tea.WithOutput(scr), tea.WithoutSignalHandler())
	runner.Send = p.Send
	done := make(chan struct{})
	go func() { defer close(done); _, _ = p.Run() }()
	defer func() { p.Kill(); <-done; runner.Stop() }()
	// The chat is ready once it shows the session, idle.
	for deadline := time.Now().Add(time.Minute); !scr.settled(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the chat never showed the session")
		}
	}
	var direct, shown []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range streamRuns {
			direct = append(direct, modelFirstToken(b, url))
			first := scr.arm()
			start := time.Now()
			p.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("go")})
			p.Send(tea.KeyMsg{Type: tea.KeyEnter})
			select {
			case at := <-first:
				shown = append(shown, at.Sub(start))
			case <-time.After(time.Minute):
				b.Fatal("the reply never reached the screen")
			}
			// The turn ends before the next starts.
			for deadline := time.Now().Add(time.Minute); !scr.settled(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the turn never ended on the screen")
				}
			}
		}
	}
	b.StopTimer()
	d50, _ := percentiles(direct)
	c50, c95 := percentiles(shown)
	b.ReportMetric(d50, "model-ttft-p50-ms")
	b.ReportMetric(c50, "chat-ttft-p50-ms")
	b.ReportMetric(c95, "chat-ttft-p95-ms")
	b.ReportMetric(c50/d50, "chat-ttft-p50-ratio")
}

// screen is the chat's UI with a terminal that notes when a frame first
// shows the reply to the message being timed.
type screen struct {
	ui *chat.UI

	mu      sync.Mutex
	from    int            // the timed reply is among the entries from this one on
	visible bool           // the last frame shows it
	first   chan time.Time // armed: where the first such write goes
	entries int            // entries in the last frame
	answer  bool           // the last frame shows the timed reply whole
	idle    bool           // the last frame shows the session open, idle
}

func (s *screen) Init() tea.Cmd { return s.ui.Init() }

func (s *screen) Update(m tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := s.ui.Update(m)
	return s, cmd
}

// View renders the UI and notes what the frame shows.
func (s *screen) View() string {
	v := s.ui.View()
	st := s.ui.State()
	s.mu.Lock()
	defer s.mu.Unlock()
	shown, answer := false, false
	for _, e := range st.Entries[min(s.from, len(st.Entries)):] {
		if strings.HasPrefix(e.Text, streamAnswer[:10]) && (e.Kind == chat.KindReply || e.Kind == chat.KindAnswer) {
			shown = true
			answer = answer || e.Kind == chat.KindAnswer
		}
	}
	s.entries, s.answer = len(st.Entries), answer
	s.visible = s.first != nil && shown
	s.idle = st.Session != "" && st.Info.Status == runtime.SessionIdle
	return v
}

// Write is the terminal: the first write after a frame that shows the
// timed reply is when it reaches the screen.
func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.visible && s.first != nil {
		s.first <- time.Now()
		s.first = nil
	}
	s.mu.Unlock()
	return io.Discard.Write(p)
}

// arm starts timing the next reply and returns where its time comes.
func (s *screen) arm() <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from, s.answer = s.entries, false
	s.first = make(chan time.Time, 1)
	return s.first
}

// settled says the last frame shows the session idle and, once armed, the
// timed reply's answer.
func (s *screen) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle && (s.first == nil && s.from == 0 || s.answer)
}
