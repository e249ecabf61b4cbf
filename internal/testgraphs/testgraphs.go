// Package testgraphs holds graphs that the tests of several packages
// share.
package testgraphs

import (
	"context"
	"fmt"
	"os"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/handoff"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// EditedDealDesk is the deal-desk graph edited as a user would between two
// deploys: the triage → coordinator handoff gained an input filter, and
// the coordinator lost its review_rollout tool (the rollout reviewer
// agent stays).
func EditedDealDesk() *agents.Graph {
	var all []*agents.Agent
	for _, a := range dealdesk.Graph().Agents() {
		c := *a
		switch c.Name {
		case "triage":
			c.Handoffs = []agents.Handoff{{Target: "coordinator", InputFilter: handoff.RemoveToolCalls}}
		case "coordinator":
			c.Tools = c.Tools[:1]
		}
		all = append(all, &c)
	}
	return agents.MustGraph("dealdesk", "triage", all...)
}

// RmRf is a tool that stands for removing a directory of the build: it
// appends the path it is given to the file log() names, and answers
// "removed PATH". Tests count its calls in that file.
func RmRf(log func() string) *agents.FunctionTool {
	return agents.MustFunctionTool("rm_rf", "Removes a directory of the build.", func(_ context.Context, a struct {
		Path string `json:"path"`
	}) (string, error) {
		f, err := os.OpenFile(log(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := fmt.Fprintln(f, a.Path); err != nil {
			return "", err
		}
		return "removed " + a.Path, nil
	})
}

// Gate is the gate graph: its agent keeper removes what it is asked to
// clean with RmRf(log), and every call of rm_rf waits for approval.
func Gate(log func() string) *agents.Graph {
	return agents.MustGraph("gate", "keeper", &agents.Agent{Name: "keeper", Instructions: "gatekeeper: cleans what it is asked to",
		Tools: []agents.Tool{RmRf(log)}, Approvals: []agents.Approval{agents.Always("rm_rf")}})
}

// Recreate is the graph "recreate": one sandbox agent, phoenix, on
// backend, whose manifest writes ash.txt ("risen"). The e2e tests of
// sandboxes re-created, lost and rerouted run it, and the replay tests
// replay their recorded runs (v15-sandbox-reroute) with it.
func Recreate(backend string) *agents.Graph {
	return agents.MustGraph("recreate", "phoenix",
		&agents.Agent{Name: "phoenix", Instructions: "recreate phoenix", Sandbox: &agents.Sandbox{Backend: backend,
			Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "ash.txt", Content: "risen"}}}}})
}
