package server

// This file sends a call's progress notifications and words a run's
// events for them (and for troupe_run_status).

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
)

// progress sends the notifications/progress of one request.
type progress struct {
	ss    *mcp.ServerSession
	ctx   context.Context // the request's values (go-sdk routes by them), never cancelled
	token any
	log   *slog.Logger

	mu     sync.Mutex
	n      int
	broken bool
	last   time.Time // of the last notification sent

	// text is the reply streaming now (its text_delta events so far), by
	// agent workflow; shown is when it was last sent as progress.
	text  map[string]*strings.Builder
	shown map[string]time.Time
}

// textEvery bounds how often a streaming reply is sent as progress: a
// notification per model token would flood a client.
const textEvery = 250 * time.Millisecond

// settleDelay separates a call's last progress notifications from its
// result. The TypeScript SDK (1.x) handles a notification on a microtask
// but a response at once, and drops progress it reads after the response
// of its request (typescript-sdk#2580): without a gap, the notifications
// sent with the run's end are read in the result's chunk and lost.
const settleDelay = 50 * time.Millisecond

// progressFor returns the progress of a request, or nil when the client
// sent no progress token.
func (s *Server) progressFor(ctx context.Context, req *mcp.CallToolRequest) *progress {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return &progress{ss: req.Session, ctx: context.WithoutCancel(ctx), token: token, log: s.log}
}

// send notifies the next step. After a failed notification (the client's
// stream is gone) it sends no more: the run is not affected.
func (p *progress) send(message string, meta mcp.Meta) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		return
	}
	p.n++
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	err := p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		Meta: meta, ProgressToken: p.token, Progress: float64(p.n), Message: message,
	})
	if err != nil {
		p.broken = true
		p.log.Debug("mcp: progress notifications stopped", "error", err)
		return
	}
	p.last = time.Now()
}

// stop ends the notifications of p.
func (p *progress) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = true
}

// settle waits until the last notification is settleDelay old.
func (p *progress) settle() {
	if p == nil {
		return
	}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	if d := time.Until(last.Add(settleDelay)); d > 0 {
		time.Sleep(d)
	}
}

func (p *progress) event(e troupe.Event) {
	if p == nil {
		return
	}
	if e.Kind == troupe.EventTextDelta {
		p.delta(e)
		return
	}
	if e.Kind == troupe.EventTurn {
		p.mu.Lock()
		delete(p.text, e.WorkflowID) // The turn's event sums it up.
		p.mu.Unlock()
	}
	if msg, ok := eventMessage(e); ok {
		p.send(msg, nil)
	}
}

// delta takes a piece of a streaming reply: the reply so far goes out as
// progress ("agent: …the text's end"), at most every textEvery per agent.
func (p *progress) delta(e troupe.Event) {
	p.mu.Lock()
	if p.text == nil {
		p.text, p.shown = map[string]*strings.Builder{}, map[string]time.Time{}
	}
	b := p.text[e.WorkflowID]
	if b == nil {
		b = &strings.Builder{}
		p.text[e.WorkflowID] = b
	}
	b.WriteString(e.Detail)
	due := time.Since(p.shown[e.WorkflowID]) >= textEvery
	if due {
		p.shown[e.WorkflowID] = time.Now()
	}
	text := b.String()
	p.mu.Unlock()
	if due {
		p.send(fmt.Sprintf("%s: %s", e.Agent, tail(text, 160)), nil)
	}
}

// tail is the end of s on one line, at most n bytes, "…" before it when
// cut.
func tail(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

// eventMessage words an event for a person following the run, e.g.
// "coordinator: calling review_pricing" or "handoff: triage → coordinator".
// ok is false for events that repeat another one.
func eventMessage(e troupe.Event) (msg string, ok bool) {
	who := e.Agent
	if who == "" {
		who = "run"
	}
	switch e.Kind {
	case troupe.EventRunStarted:
		return "", false // the call says "run <id> started" itself
	case troupe.EventTextDelta:
		return "", false // pieces of a reply: progress.delta sends them
	case troupe.EventAgentStarted:
		if e.Child == "" {
			return "", false // the agent's own record of what its parent said
		}
		return e.Agent + " started", true
	case troupe.EventTurn:
		if e.Detail != "" {
			return fmt.Sprintf("%s: turn %d: %s", who, e.Turn, short(e.Detail)), true
		}
		return fmt.Sprintf("%s: turn %d", who, e.Turn), true
	case troupe.EventToolCalled, troupe.EventAgentToolStarted:
		return fmt.Sprintf("%s: calling %s", who, e.Tool), true
	case troupe.EventToolResult:
		return fmt.Sprintf("%s: %s returned", who, e.Tool), true
	case troupe.EventAgentToolFinished:
		return fmt.Sprintf("%s: %s finished", who, e.Tool), true
	case troupe.EventHandoff:
		if e.Turn != 0 {
			return "", false // the orchestrator records the same handoff
		}
		return "handoff: " + e.Detail, true
	case troupe.EventApprovalRequested:
		msg = fmt.Sprintf("%s: %s waits for approval (call %s)", who, e.Tool, e.Approval)
		if e.Detail != "" {
			msg += ": " + short(e.Detail)
		}
		return msg, true
	case troupe.EventApprovalDecided:
		return fmt.Sprintf("%s: %s %s", who, e.Tool, short(e.Detail)), true
	case troupe.EventOutputInvalid:
		return who + ": invalid output, asking again", true
	case troupe.EventFinal:
		if e.Agent == "" || e.Turn == 0 {
			return "run finished", true
		}
		return who + ": final output", true
	case troupe.EventFailed:
		if e.Agent == "" {
			return "run failed: " + short(e.Detail), true
		}
		return fmt.Sprintf("%s: failed: %s", who, short(e.Detail)), true
	}
	msg = who + ": " + strings.ReplaceAll(e.Kind, "_", " ")
	if e.Detail != "" {
		msg += ": " + short(e.Detail)
	}
	return msg, true
}

// short is s on one line, at most 160 bytes.
func short(s string) string { return clip(s, 160) }

// clip is s on one line, at most n bytes (and an ellipsis), cut between
// runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
