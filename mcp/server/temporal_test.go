package server

// A fake Temporal client for the tests that must see what the server asks
// of Temporal without a server: the workflows it knows, and the starts.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
)

// errNoStart is what fakeTemporal answers a start with.
var errNoStart = errors.New("fake: starts are only recorded")

// fakeWorkflow is a workflow fakeTemporal knows.
type fakeWorkflow struct {
	typ string
	in  any // the first argument it was started with
}

// fakeTemporal knows workflows by id and records the starts and the
// sessions asked for (which it refuses). Other methods of client.Client panic: the embedded interface
// is nil.
type fakeTemporal struct {
	client.Client
	workflows map[string]fakeWorkflow

	mu       sync.Mutex
	starts   []string
	runs     []troupe.RunInput // the inputs of the starts of runs
	sessions []troupe.CreateSessionInput
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, opts.ID)
	if len(args) > 0 {
		if in, ok := args[0].(troupe.RunInput); ok {
			f.runs = append(f.runs, in)
		}
	}
	return nil, errNoStart
}

func (f *fakeTemporal) started() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.starts...)
}

func (f *fakeTemporal) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return nil
}

// UpdateWithStartWorkflow records a session creation (client.CreateSession).
func (f *fakeTemporal) UpdateWithStartWorkflow(_ context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range opts.UpdateOptions.Args {
		if in, ok := a.(troupe.CreateSessionInput); ok {
			f.sessions = append(f.sessions, in)
		}
	}
	return nil, errNoStart
}

func (f *fakeTemporal) sessionsAsked() []troupe.CreateSessionInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]troupe.CreateSessionInput(nil), f.sessions...)
}

func (f *fakeTemporal) CancelWorkflow(context.Context, string, string) error { return nil }

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	wf, ok := f.workflows[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-" + id},
		Type:      &commonpb.WorkflowType{Name: wf.typ},
		Status:    enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
		StartTime: timestamppb.New(time.Unix(1700000000, 0)),
	}}, nil
}

func (f *fakeTemporal) GetWorkflowHistory(_ context.Context, id, _ string, _ bool, _ enums.HistoryEventFilterType) client.HistoryEventIterator {
	wf := f.workflows[id]
	input, err := converter.GetDefaultDataConverter().ToPayloads(wf.in)
	return &fakeHistory{err: err, events: []*historypb.HistoryEvent{{
		EventType: enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				WorkflowType: &commonpb.WorkflowType{Name: wf.typ}, Input: input,
			},
		},
	}}}
}

type fakeHistory struct {
	err    error
	events []*historypb.HistoryEvent
}

func (h *fakeHistory) HasNext() bool { return len(h.events) > 0 }

func (h *fakeHistory) Next() (*historypb.HistoryEvent, error) {
	if h.err != nil {
		return nil, h.err
	}
	ev := h.events[0]
	h.events = h.events[1:]
	return ev, nil
}

// newFakeServer returns a Server of graphs on a fakeTemporal that knows
// known.
func newFakeServer(t *testing.T, known map[string]fakeWorkflow, graphs ...*agents.Graph) (*Server, *fakeTemporal) {
	t.Helper()
	f := &fakeTemporal{workflows: known}
	s, err := New(Config{Client: f, Graphs: graphs})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// session is a known SessionWorkflow started with in.
func session(in troupe.SessionInput) fakeWorkflow {
	return fakeWorkflow{typ: troupe.SessionWorkflowName, in: in}
}

// orchestrator is a known OrchestratorWorkflow started with in.
func orchestrator(in troupe.RunInput) fakeWorkflow {
	return fakeWorkflow{typ: troupe.OrchestratorWorkflowName, in: in}
}
