package codereview

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/workflows"
)

func TestFindingsHaveFiles(t *testing.T) {
	tests := []struct {
		name     string
		findings Findings
		trip     string // in the reason; "" passes
	}{
		{"none", Findings{Reviewer: "tests"}, ""},
		{"all with files", Findings{Reviewer: "security", Findings: []Finding{{File: "a.go", Line: 3, Severity: SeverityHigh, Message: "key"}}}, ""},
		{"one without", Findings{Reviewer: "security", Findings: []Finding{
			{File: "a.go", Severity: SeverityLow, Message: "fine"}, {File: " ", Severity: SeverityHigh, Message: "somewhere"}}},
			`security reviewer gave 1 finding(s) without a file: "somewhere"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, _ := json.Marshal(tc.findings)
			v, err := FindingsHaveFiles.Func(context.Background(), agents.RunContext{}, doc)
			if err != nil || v.Tripwire != (tc.trip != "") || !strings.Contains(v.Reason, tc.trip) {
				t.Errorf("verdict %+v, %v; want a trip with %q", v, err, tc.trip)
			}
		})
	}
	for _, a := range Graph().Agents() {
		has := slices.ContainsFunc(a.OutputGuardrails, func(g agents.OutputGuardrail) bool { return g.Name == FindingsHaveFiles.Name })
		if reviews := strings.HasSuffix(a.Name, "_reviewer"); has != reviews {
			t.Errorf("agent %s has the findings guardrail: %v", a.Name, has)
		}
	}
}

// A reviewer's finding without a file ends the review, naming the
// guardrail and the reviewer; with files, the coordinator gets the
// findings. The reviewer stands in without its sandbox.
func TestFindingsGuardrailEndsTheReview(t *testing.T) {
	for _, tc := range []struct {
		name, findings string
		trip           bool
	}{
		{"with a file", `{"reviewer":"security","findings":[{"file":"auth.go","line":4,"severity":"high","message":"a key"}]}`, false},
		{"without a file", `{"reviewer":"security","findings":[{"file":"","line":0,"severity":"high","message":"a key somewhere"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reviewer := &agents.Agent{Name: "security_reviewer", Instructions: "reviewer", Output: agents.MustOutput[Findings](),
				OutputGuardrails: []agents.OutputGuardrail{FindingsHaveFiles}}
			coordinator := &agents.Agent{Name: "coordinator", Instructions: "coordinator",
				Tools: []agents.Tool{agents.AsTool("security_reviewer", "review_security", "Reviews.")}}
			g := agents.MustGraph("review", "coordinator", coordinator, reviewer)
			respond := func(req model.Request) []agents.Item {
				if req.Instructions == "reviewer" {
					return []agents.Item{agents.AssistantMessage(tc.findings)}
				}
				if last := req.Input[len(req.Input)-1]; last.Type == agents.ItemFunctionCallOutput {
					return []agents.Item{agents.AssistantMessage("report: " + last.Output)}
				}
				return []agents.Item{agents.FunctionCall("c1", "review_security", `{"input":"review"}`)}
			}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			store, _ := blob.Open(context.Background(), "mem://")
			r, err := workflows.NewRunner(workflows.Config{Graphs: []*agents.Graph{g}, Model: modelFunc(respond), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			r.Register(env)
			env.ExecuteWorkflow(troupe.OrchestratorWorkflowName, troupe.RunInput{Graph: "review", Input: "Review this change."})
			err = env.GetWorkflowError()
			trip, tripped := troupe.TrippedGuardrail(err)
			switch {
			case tc.trip && (!tripped || trip.Guardrail != "findings_have_files" || trip.Agent != "security_reviewer"):
				t.Fatalf("err = %v (%+v); want findings_have_files of security_reviewer tripped", err, trip)
			case !tc.trip && err != nil:
				t.Fatal(err)
			}
		})
	}
}

// modelFunc is a model that answers with a func.
type modelFunc func(model.Request) []agents.Item

func (f modelFunc) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	return &model.Response{Output: f(req)}, nil
}
