package server

// This file serves the run tools, troupe_run_status and troupe_run_result,
// which read a run by id from any session: after a dropped connection, a
// client reconnects and picks its run up here.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/client"
)

// Bounds of troupe_run_result's wait_seconds.
const (
	defaultWaitSeconds = 10
	maxWaitSeconds     = 60
)

// recentEvents is how many events troupe_run_status shows.
const recentEvents = 20

// eventsTimeout bounds reading a run's events: a closed run answers only
// when a worker of its task queue replays it.
const eventsTimeout = 5 * time.Second

var runIDProperty = `"run_id":{"type":"string","description":"The run's id: the _meta[\"` + MetaRunID + `\"] of an agent tool's result or first progress notification."}`

var runStatusTool = &mcp.Tool{
	Name:  ToolRunStatus,
	Title: "Troupe run status",
	Description: "Reports a Troupe run that an agent tool of this server started, by id: its status (running, completed, failed, cancelled, terminated, timed_out), " +
		"the agent it is at, and its recent events. Works from any session, also after the call that started the run was interrupted.",
	InputSchema:  json.RawMessage(`{"type":"object","properties":{` + runIDProperty + `},"required":["run_id"],"additionalProperties":false}`),
	OutputSchema: json.RawMessage(statusSchema),
	Annotations:  &mcp.ToolAnnotations{Title: "Troupe run status", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
}

var runResultTool = &mcp.Tool{
	Name:  ToolRunResult,
	Title: "Troupe run result",
	Description: fmt.Sprintf("Returns the result of a Troupe run that an agent tool of this server started, by id, as that tool would have: "+
		"its output once the run has finished (or why it failed). A running run is waited for up to wait_seconds "+
		"(default %d, at most %d); if it is still running then, the answer is its status, with _meta[%q] \"running\": call again.",
		defaultWaitSeconds, maxWaitSeconds, MetaStatus),
	InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%s,"wait_seconds":{"type":"integer","minimum":0,"maximum":%d,`+
		`"description":"How long to wait for a running run to finish, in seconds; default %d."}},"required":["run_id"],"additionalProperties":false}`,
		runIDProperty, maxWaitSeconds, defaultWaitSeconds)),
	Annotations: &mcp.ToolAnnotations{Title: "Troupe run result", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
}

const statusSchema = `{"type":"object","properties":{` +
	`"run_id":{"type":"string"},` +
	`"status":{"type":"string","enum":["running","completed","failed","cancelled","terminated","timed_out","continued_as_new","unknown"]},` +
	`"graph":{"type":"string"},` +
	`"agent":{"type":"string","description":"The agent the run is at, or the one that gave its output."},` +
	`"tool":{"type":"string","description":"The agent tool that starts such runs, if the run's agent is exposed."},` +
	`"started_at":{"type":"string"},"closed_at":{"type":"string"},` +
	`"error":{"type":"string","description":"Why the run closed without an output."},` +
	`"events":{"type":"array","description":"The run's latest events, oldest first.","items":{"type":"object","properties":{` +
	`"time":{"type":"string"},"kind":{"type":"string"},"agent":{"type":"string"},"message":{"type":"string"}},"required":["time","kind","message"]}},` +
	`"events_unavailable":{"type":"string","description":"Why the events could not be read."},` +
	`"approvals":{"type":"array","description":"The calls of a running run that wait for a human's decision (decide them with ` + ToolRunApprove + `).","items":{"type":"object","properties":{` +
	`"id":{"type":"string"},"agent":{"type":"string"},"tool":{"type":"string"},"arguments":{"type":"object"},"since":{"type":"string"},"deadline":{"type":"string"},"on_timeout":{"type":"string"}},` +
	`"required":["id","agent","tool","arguments","since"]}}},` +
	`"required":["run_id","status","graph","agent","started_at","events"]}`

// runStatus is troupe_run_status's answer.
type runStatus struct {
	RunID             string        `json:"run_id"`
	Status            string        `json:"status"`
	Graph             string        `json:"graph"`
	Agent             string        `json:"agent"`
	Tool              string        `json:"tool,omitempty"`
	StartedAt         time.Time     `json:"started_at"`
	ClosedAt          *time.Time    `json:"closed_at,omitempty"`
	Error             string        `json:"error,omitempty"`
	Events            []statusEvent `json:"events"`
	EventsUnavailable string        `json:"events_unavailable,omitempty"`
	Approvals         []approvalDoc `json:"approvals,omitempty"`
}

type statusEvent struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Agent   string    `json:"agent,omitempty"`
	Message string    `json:"message"`
}

// runInfo is what Temporal says of a run.
type runInfo struct {
	id     string
	status string // as client.RunInfo has it: RUNNING, COMPLETED...
	in     troupe.RunInput
	start  time.Time
	close  time.Time
}

func (r *runInfo) closed() bool { return r.status != "RUNNING" }

func (s *Server) runStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		RunID string `json:"run_id"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %s: %v", ToolRunStatus, err), nil), nil
	}
	info, err := s.lookup(ctx, args.RunID)
	if err != nil {
		return errorResult(err.Error(), nil), nil
	}
	var res *troupe.RunResult
	var runErr error
	if info.closed() {
		res, runErr = s.closedOutcome(ctx, info.id)
	}
	return statusResult(s.status(ctx, info, res, runErr)), nil
}

func (s *Server) runResult(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		RunID       string `json:"run_id"`
		WaitSeconds *int   `json:"wait_seconds"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %s: %v", ToolRunResult, err), nil), nil
	}
	wait := defaultWaitSeconds
	if args.WaitSeconds != nil {
		wait = *args.WaitSeconds
	}
	if wait < 0 || wait > maxWaitSeconds {
		return errorResult(fmt.Sprintf("invalid arguments for %s: wait_seconds must be 0 to %d", ToolRunResult, maxWaitSeconds), nil), nil
	}
	info, err := s.lookup(ctx, args.RunID)
	if err != nil {
		return errorResult(err.Error(), nil), nil
	}
	var res *troupe.RunResult
	var runErr error
	if info.closed() {
		res, runErr = s.closedOutcome(ctx, info.id)
	} else {
		// Waiting is not the run: cancelling this call cancels no run,
		// so it is registered without a key.
		cl, wctx := s.calls.add(ctx, callKey{})
		defer s.calls.remove(cl, false)
		// A read asks no one to decide: calls that wait end the wait,
		// and the answer lists them.
		w := s.wait(wctx, s.progressFor(ctx, req), info.id, time.Duration(wait)*time.Second, s.watchApprovals(req, info.id, false))
		res, runErr = w.res, w.err
		if w.waiting != nil {
			return waitingResult(info.id, false, w.waiting, false), nil
		}
		if !w.done {
			if wctx.Err() != nil {
				return interruptedResult(wctx, info.id), nil
			}
			st := s.status(ctx, info, nil, nil)
			out := statusResult(st)
			out.Content = append([]mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("Run %s is still running (at agent %s); call %s again to wait more.", info.id, st.Agent, ToolRunResult),
			}}, out.Content...)
			return out, nil
		}
	}
	out := s.outcome(info.id, res, runErr)
	status := info.status
	if !info.closed() {
		if d, err := s.runs.Run(info.id).Describe(ctx); err == nil {
			status = d.Status
		}
	}
	out.Meta[MetaStatus] = statusName(status)
	return out, nil
}

// closedOutcome reads the outcome of a closed run.
func (s *Server) closedOutcome(ctx context.Context, id string) (*troupe.RunResult, error) {
	return s.runs.Run(id).Result(ctx)
}

// lookup finds run id, which must be a run this server's agent tools
// start: an OrchestratorWorkflow under an id "mcp-<graph>-<32 hex digits>"
// of a served graph, of that graph, at one of its exposed agents. Every
// other id — of a `troupe run`, of a graph or agent not served, of an
// agent's own workflow — is "no run with id X", as an unknown one is, so
// a client learns nothing of runs it could not have started here. The
// errors are for the client to read.
func (s *Server) lookup(ctx context.Context, id string) (*runInfo, error) {
	if id == "" {
		return nil, errors.New("run_id is required")
	}
	noRun := fmt.Errorf("no run with id %q", id)
	g := s.graphOfRunID(id)
	if g == nil {
		return nil, noRun
	}
	run := s.runs.Run(id)
	d, err := run.Describe(ctx)
	if err != nil {
		if errors.Is(err, client.ErrNoRun) || errors.Is(err, client.ErrNotRun) {
			return nil, noRun
		}
		return nil, fmt.Errorf("could not look run %q up: %w", id, err)
	}
	info := &runInfo{id: id, status: d.Status, start: d.Start}
	if d.Close != nil {
		info.close = *d.Close
	}
	if info.in, err = run.Input(ctx); err != nil {
		return nil, fmt.Errorf("could not read the input of run %q: %w", id, err)
	}
	if info.in.Graph != g.Name() {
		return nil, noRun
	}
	if a, err := g.Agent(info.in.Agent); info.in.Agent == "" || err != nil || a.Expose == nil {
		return nil, noRun
	}
	return info, nil
}

// graphOfRunID is the served graph whose agent tools derive id (see
// workflowID), or nil.
func (s *Server) graphOfRunID(id string) *agents.Graph {
	rest, ok := strings.CutPrefix(id, "mcp-")
	if !ok || len(rest) < 33 {
		return nil
	}
	name, digits := rest[:len(rest)-33], rest[len(rest)-33:]
	if digits[0] != '-' || !isLowerHex(digits[1:]) {
		return nil
	}
	return s.graphs[name]
}

func isLowerHex(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// status builds troupe_run_status's answer; res and runErr are the
// outcome of a closed run.
func (s *Server) status(ctx context.Context, info *runInfo, res *troupe.RunResult, runErr error) *runStatus {
	st := &runStatus{RunID: info.id, Status: statusName(info.status), Graph: info.in.Graph, StartedAt: info.start, Events: []statusEvent{}}
	if !info.close.IsZero() {
		st.ClosedAt = &info.close
	}
	g := s.graphs[info.in.Graph]
	st.Agent = info.in.Agent
	if st.Agent == "" {
		st.Agent = g.Entry()
	}
	if a, err := g.Agent(st.Agent); err == nil && a.Expose != nil {
		st.Tool = g.ExposedName(a)
	}
	qctx, cancel := context.WithTimeout(ctx, eventsTimeout)
	evs, err := s.runs.Run(info.id).Events(qctx)
	cancel()
	if err != nil {
		st.EventsUnavailable = err.Error()
	}
	for _, e := range evs {
		if e.Kind == troupe.EventAgentStarted && e.WorkflowID == info.id {
			st.Agent = e.Agent // the run's agents, in order: the last is current
		}
	}
	for _, e := range evs[max(0, len(evs)-recentEvents):] {
		msg, ok := eventMessage(e)
		if !ok {
			msg = strings.ReplaceAll(e.Kind, "_", " ")
		}
		st.Events = append(st.Events, statusEvent{Time: e.Time, Kind: e.Kind, Agent: e.Agent, Message: msg})
	}
	if !info.closed() {
		qctx, cancel := context.WithTimeout(ctx, eventsTimeout)
		if list, err := s.runs.Approvals(qctx, info.id); err == nil && len(list) > 0 {
			st.Approvals = approvalDocs(list)
		}
		cancel()
	}
	switch {
	case res != nil:
		st.Agent = res.Agent
	case runErr != nil:
		st.Error = runErrorResult(info.id, runErr).Content[0].(*mcp.TextContent).Text
	}
	return st
}

func statusResult(st *runStatus) *mcp.CallToolResult {
	doc, _ := json.Marshal(st)
	return &mcp.CallToolResult{
		Meta:              mcp.Meta{MetaRunID: st.RunID, MetaStatus: st.Status},
		Content:           []mcp.Content{&mcp.TextContent{Text: pretty(doc)}},
		StructuredContent: json.RawMessage(doc),
	}
}

// statusName is a run's status as the run tools name it.
func statusName(s string) string {
	switch s {
	case "RUNNING", "COMPLETED", "FAILED", "TERMINATED", "TIMED_OUT", "CONTINUED_AS_NEW":
		return strings.ToLower(s)
	case "CANCELED":
		return "cancelled"
	}
	return "unknown"
}

// decodeArgs decodes a run tool's arguments strictly.
func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
