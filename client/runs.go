package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/troupe-dev/troupe"
)

// StartRun starts a run's OrchestratorWorkflow on taskQueue (the default
// queue when empty) with a fresh workflow id, and returns its handle.
func StartRun(ctx context.Context, c client.Client, taskQueue string, in troupe.RunInput) (client.WorkflowRun, error) {
	if taskQueue == "" {
		taskQueue = troupe.DefaultTaskQueue
	}
	if err := troupe.CheckPayload("the run input", len(in.Input)); err != nil {
		return nil, err
	}
	opts := client.StartWorkflowOptions{
		ID:            freshRunID(in.Graph),
		TaskQueue:     taskQueue,
		StaticSummary: in.Summary(),
		Memo:          runMemo(in),
	}
	run, err := c.ExecuteWorkflow(ctx, opts, troupe.OrchestratorWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("client: start run of %s: %w", in.Graph, err)
	}
	return run, nil
}

// NewRunID returns a fresh run id for graph, "troupe-<graph>-<8 hex>",
// as Start gives a run without WithID: for a caller that stores a run's
// data under its id (troupe.InputKey) before starting it with WithID.
func NewRunID(graph string) string { return freshRunID(graph) }

// NewSessionID returns a fresh id for a session of graph, of the form the
// session manager gives one created without an id (troupe.SessionID): a
// client that puts a session's inputs under it before the session exists
// names it so (WithID).
func NewSessionID(graph string) string {
	return troupe.SessionID(graph, uuid.NewString()[:8])
}

// freshRunID is a new run's id: "troupe-<graph>-<8 hex>".
func freshRunID(graph string) string {
	return fmt.Sprintf("troupe-%s-%s", graph, uuid.NewString()[:8])
}

// Execute starts a run and waits for its result.
func Execute(ctx context.Context, c client.Client, taskQueue string, in troupe.RunInput) (*troupe.RunResult, error) {
	run, err := StartRun(ctx, c, taskQueue, in)
	if err != nil {
		return nil, err
	}
	var res troupe.RunResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// StartRunWithID starts a run's OrchestratorWorkflow on taskQueue (the
// default queue when empty) under workflow id, or returns the run that
// already holds id: a running one (conflict policy USE_EXISTING) or a closed
// one (reuse policy REJECT_DUPLICATE, so a closed run is never replaced and
// its handle's Get returns its result or error). Starting twice with one id
// therefore gives one run, which makes a derived id an idempotency key.
func StartRunWithID(ctx context.Context, c client.Client, taskQueue, id string, in troupe.RunInput) (client.WorkflowRun, error) {
	if taskQueue == "" {
		taskQueue = troupe.DefaultTaskQueue
	}
	if id == "" {
		return nil, errors.New("client: start run: empty workflow id")
	}
	if strings.Contains(id, "/") {
		// The ids of a run's agents are its id and a path: the run is
		// what comes before the first "/" (RunOf).
		return nil, fmt.Errorf("client: start run: workflow id %q holds a \"/\"", id)
	}
	if err := troupe.CheckPayload("the run input", len(in.Input)); err != nil {
		return nil, err
	}
	opts := client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            in.Summary(),
		Memo:                     runMemo(in),
	}
	run, err := c.ExecuteWorkflow(ctx, opts, troupe.OrchestratorWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("client: start run %s of %s: %w", id, in.Graph, err)
	}
	return run, nil
}

// Memo keys of a run's orchestrator workflow, which lists of runs show.
const (
	MemoGraph   = "troupe.graph"
	MemoSummary = "troupe.summary"
)

func runMemo(in troupe.RunInput) map[string]any {
	return map[string]any{MemoGraph: in.Graph, MemoSummary: in.Summary()}
}

// RunInfo is a run as ListRuns and DescribeRun see it.
type RunInfo struct {
	// WorkflowID is the run's id (its orchestrator's workflow id).
	WorkflowID string `json:"workflow_id"`
	// Graph is the graph the run runs ("" for runs started before runs
	// recorded it).
	Graph string `json:"graph,omitempty"`
	// Summary is the graph and the start of the user's message.
	Summary string `json:"summary,omitempty"`
	// Status is RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED or
	// TIMED_OUT.
	Status string `json:"status"`
	// Start is when the run started; Close, when it closed (nil while it
	// runs).
	Start time.Time  `json:"start"`
	Close *time.Time `json:"close,omitempty"`
	// TaskQueue is the queue its workflows run on: the workers that serve
	// it are the ones that can move it on.
	TaskQueue string `json:"task_queue"`
}

// ListOptions says which runs ListRuns returns.
type ListOptions struct {
	// Running keeps only the runs still running.
	Running bool
	// Limit bounds how many runs are returned, newest first (0: 50).
	Limit int
}

// ListRuns returns the runs that c's namespace holds (as long as its
// retention keeps closed ones), newest first. It reads their memos with
// the SDK's default data converter; Client.List reads them with the
// client's (Config.DataConverter), which opens sealed ones.
func ListRuns(ctx context.Context, c client.Client, o ListOptions) ([]RunInfo, error) {
	return listRuns(ctx, c, nil, o)
}

func listRuns(ctx context.Context, c client.Client, dc converter.DataConverter, o ListOptions) ([]RunInfo, error) {
	if o.Limit <= 0 {
		o.Limit = 50
	}
	// A run that continued as new is one run: its earlier runs are not
	// listed.
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", troupe.OrchestratorWorkflowName)
	if o.Running {
		query += " AND ExecutionStatus = 'Running'"
	}
	var out []RunInfo
	var token []byte
	for len(out) < o.Limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(o.Limit - len(out)), NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("client: list runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			info := runInfo(e, dc)
			if err := firstStart(ctx, c, e, &info); err != nil {
				return nil, fmt.Errorf("client: list runs: %w", err)
			}
			out = append(out, info)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return out, nil
}

// ErrNotRun is the error of DescribeRun for the id of a workflow that is
// not a run: one of a run's agents, say, or another application's.
var ErrNotRun = errors.New("not a run")

// ErrNoRun is the error of DescribeRun for an id that no workflow has
// (or none that the server still keeps).
var ErrNoRun = errors.New("not found")

// DescribeRun returns the run id. The id of a workflow that is not a
// run's orchestrator is an error wrapping ErrNotRun; that of no workflow
// one wrapping ErrNoRun. It reads the run's memo as ListRuns does.
func DescribeRun(ctx context.Context, c client.Client, id string) (RunInfo, error) {
	return describeRun(ctx, c, nil, id)
}

func describeRun(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (RunInfo, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return RunInfo{}, fmt.Errorf("run %s: %w", id, ErrNoRun)
		}
		return RunInfo{}, fmt.Errorf("describe run %s: %w", id, err)
	}
	e := d.GetWorkflowExecutionInfo()
	if typ := e.GetType().GetName(); typ != troupe.OrchestratorWorkflowName {
		if run := troupe.RunOf(id); run != id {
			return RunInfo{}, fmt.Errorf("%s is %w but a workflow of run %s (%s)", id, ErrNotRun, run, typ)
		}
		return RunInfo{}, fmt.Errorf("%s is %w but a %s workflow", id, ErrNotRun, typ)
	}
	info := runInfo(e, dc)
	if err := firstStart(ctx, c, e, &info); err != nil {
		return RunInfo{}, fmt.Errorf("client: describe run %s: %w", id, err)
	}
	return info, nil
}

// firstStart sets info.Start to when the run began: the start of the
// first run of its chain when it continued as new (e is the latest run).
// A listing does not say which run was first, so e without it is
// described again.
func firstStart(ctx context.Context, c client.Client, e *workflowpb.WorkflowExecutionInfo, info *RunInfo) error {
	id, first := e.GetExecution().GetWorkflowId(), e.GetFirstRunId()
	if first == "" {
		d, err := c.DescribeWorkflowExecution(ctx, id, e.GetExecution().GetRunId())
		if err != nil {
			return err
		}
		first = d.GetWorkflowExecutionInfo().GetFirstRunId()
	}
	if first == "" || first == e.GetExecution().GetRunId() {
		return nil
	}
	d, err := c.DescribeWorkflowExecution(ctx, id, first)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil // The first run is past retention: its start is gone.
		}
		return err
	}
	info.Start = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	return nil
}

// runInfo is the run of e, its memo read with dc (nil: the default data
// converter). A memo that does not decode (sealed with a key dc lacks)
// leaves the graph empty and says why in the summary.
func runInfo(e *workflowpb.WorkflowExecutionInfo, dc converter.DataConverter) RunInfo {
	info := RunInfo{
		WorkflowID: e.GetExecution().GetWorkflowId(),
		Start:      e.GetStartTime().AsTime(),
		TaskQueue:  e.GetTaskQueue(),
	}
	info.Status = statusName(e.GetStatus())
	if e.GetCloseTime() != nil {
		t := e.GetCloseTime().AsTime()
		info.Close = &t
	}
	fields := e.GetMemo().GetFields()
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var err error
	if p := fields[MemoGraph]; p != nil {
		err = dc.FromPayload(p, &info.Graph)
	}
	if p := fields[MemoSummary]; p != nil && err == nil {
		err = dc.FromPayload(p, &info.Summary)
	}
	if err != nil {
		info.Graph, info.Summary = "", "("+err.Error()+")"
	}
	return info
}

// statusName is a workflow status as RunInfo names it: RUNNING, FAILED...
func statusName(s enums.WorkflowExecutionStatus) string {
	return strings.TrimPrefix(enums.WorkflowExecutionStatus_name[int32(s)], "WORKFLOW_EXECUTION_STATUS_")
}

// RunInputOf returns the input the run id started with, read with the
// SDK's default data converter; Run.Input reads it with the client's
// (Config.DataConverter).
func RunInputOf(ctx context.Context, c client.Client, id string) (troupe.RunInput, error) {
	return runInputOf(ctx, c, nil, id)
}

func runInputOf(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (troupe.RunInput, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var in troupe.RunInput
	it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("client: run %s has no history", id)
	}
	first, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("client: history of run %s: %w", id, err)
	}
	payloads := first.GetWorkflowExecutionStartedEventAttributes().GetInput()
	if err := dc.FromPayloads(payloads, &in); err != nil {
		return in, fmt.Errorf("client: input of run %s: %w", id, err)
	}
	return in, nil
}
