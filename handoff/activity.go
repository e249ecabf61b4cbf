package handoff

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// ActivityName is the handoff activity: a handoff's callback and input
// filter, run as the chain goes from one agent to the next. It is stable:
// histories refer to it.
const ActivityName = "troupe.Handoff"

// ActivityInput is the handoff activity's input.
type ActivityInput struct {
	Graph      string                `json:"graph"`
	From       string                `json:"from"`
	Tool       string                `json:"tool"`
	Run        agents.RunContext     `json:"run"`
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
	// NewKey is the key of the filtered transcript.
	NewKey string `json:"new_key"`
}

// ActivityOutput is the handoff activity's result: the conversation the
// target receives.
type ActivityOutput struct {
	Transcript runtime.TranscriptRef `json:"transcript"`
	Pending    []agents.Item         `json:"pending,omitempty"`
}

// Activities run the handoffs' callbacks and input filters of the graphs
// a worker serves.
type Activities struct {
	// Graph resolves a run's graph as the worker serves it now
	// (troupe.ErrGraphChanged when it is no longer served).
	Graph func(name string) (*agents.Graph, error)
	// Transcripts holds the conversations.
	Transcripts *transcript.Transcripts
}

// Register registers the activities on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Handoff, activity.RegisterOptions{Name: ActivityName})
}

// Handoff runs a handoff's callback and input filter, and stores the
// filtered conversation as a new transcript.
func (a *Activities) Handoff(ctx context.Context, in ActivityInput) (*ActivityOutput, error) {
	g, err := a.Graph(in.Graph)
	if err != nil {
		return nil, err
	}
	ref := g.Tool(in.From, in.Tool)
	if ref.Kind != agents.ToolHandoff || ref.Handoff.InputFilter == nil && ref.Handoff.OnHandoff == nil {
		// The run started with a callback or an input filter on this
		// handoff (the chain asks only then), and this worker's graph has
		// none: going on would hand the target a conversation nobody
		// filtered, quietly.
		return nil, troupe.NonRetryable(troupe.ErrGraphChanged, "handoff %s of agent %q had an input filter or callback when the run started, and graph %q as this worker serves it has none: "+
			"run the graph the run started with, or start the run again", in.Tool, in.From, in.Graph)
	}
	h := ref.Handoff
	if h.OnHandoff != nil {
		if err := h.OnHandoff(ctx, in.Run); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("on-handoff callback of %s: %v", h.Name(), err), troupe.ErrHandoff, err)
		}
	}
	if h.InputFilter == nil {
		return &ActivityOutput{Transcript: in.Transcript, Pending: in.Pending}, nil
	}
	view := in.Transcript
	view.View = nil
	history, _, err := a.Transcripts.LoadView(ctx, view, in.Pending)
	if err != nil {
		return nil, err
	}
	filtered, err := h.InputFilter(ctx, agents.HandoffInput{History: history})
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("input filter of %s: %v", h.Name(), err), troupe.ErrHandoff, err)
	}
	out, err := a.Transcripts.Append(ctx, runtime.TranscriptRef{Key: in.NewKey}, filtered.History)
	if err != nil {
		return nil, err
	}
	return &ActivityOutput{Transcript: out}, nil
}
