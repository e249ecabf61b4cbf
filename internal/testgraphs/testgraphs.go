// Package testgraphs holds graphs that the tests of several packages
// share.
package testgraphs

import (
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/handoff"
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
