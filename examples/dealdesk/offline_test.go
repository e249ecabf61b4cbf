package dealdesk_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/examples/dealdesk"
	"github.com/troupe-dev/troupe/internal/exampletest"
	"github.com/troupe-dev/troupe/runtime/model"
)

// TestOfflineFlows asks the offline scenario the deal desk's documented
// flows in the README's words and in others a user would use: the rule
// for the flow answers, and what the message says (the new discount)
// reaches the answer.
func TestOfflineFlows(t *testing.T) {
	a := exampletest.NewAsker(t, dealdesk.Graph(), dealdesk.Scenario, nil)
	reviewed := []agents.Item{
		agents.UserMessage("Review the Acme Corp deal"),
		agents.FunctionCall("c1", "transfer_to_coordinator", "{}"),
		agents.FunctionCallOutput("c1", `{"assistant":"coordinator"}`),
		agents.AssistantMessage(`{"decision":"approve_with_conditions","pricing_risk":"high","rollout_risk":"medium","conditions":[],"summary":"..."}`),
	}
	handedOff := func(msg string) []agents.Item {
		return []agents.Item{agents.UserMessage(msg), agents.FunctionCall("c1", "transfer_to_coordinator", "{}"),
			agents.FunctionCallOutput("c1", `{"assistant":"coordinator"}`)}
	}
	coordinatorTools := []string{"review_pricing", "review_rollout"}
	type ask struct {
		input []agents.Item
		want  string // in the answer
	}
	flows := []struct {
		flow, agent, rule string
		tools             []string
		asks              map[string]ask
	}{
		{"what if (a session's follow-up)", "coordinator", "coordinator-follow-up", coordinatorTools, map[string]ask{
			"What if the discount were 25%?":               {append(reviewed[:4:4], agents.UserMessage("What if the discount were 25%?")), "with this change: What if the discount were 25%?"},
			"How about 25% off?":                           {append(reviewed[:4:4], agents.UserMessage("How about 25% off?")), "25%"},
			"Suppose we gave them 25 percent instead":      {append(reviewed[:4:4], agents.UserMessage("Suppose we gave them 25 percent instead")), "25 percent"},
			"try it with a 25% discount":                   {append(reviewed[:4:4], agents.UserMessage("try it with a 25% discount")), "25%"},
			"WHAT IF WE LOWERED THE DISCOUNT TO 25 %?":     {append(reviewed[:4:4], agents.UserMessage("WHAT IF WE LOWERED THE DISCOUNT TO 25 %?")), "25 %"},
			"And if we cut it to 25 per cent, is it fine?": {append(reviewed[:4:4], agents.UserMessage("And if we cut it to 25 per cent, is it fine?")), "25 per cent"},
		}},
		{"pricing again (the follow-up's review)", "pricing_reviewer", "pricing-reviews-again", []string{"exec_command"}, map[string]ask{}},
		{"every deal in the pipeline (the runaway)", "coordinator", "coordinator-runaway", coordinatorTools, map[string]ask{
			"Review every deal in the pipeline":       {handedOff("Review every deal in the pipeline"), "pipeline deal 4"},
			"Review all the deals in the pipeline":    {handedOff("Review all the deals in the pipeline"), "pipeline deal 4"},
			"go through the whole pipeline":           {handedOff("go through the whole pipeline"), "pipeline deal 4"},
			"review each deal in our pipeline please": {handedOff("review each deal in our pipeline please"), "pipeline deal 4"},
			"Check ALL pipeline deals":                {handedOff("Check ALL pipeline deals"), "pipeline deal 4"},
		}},
		{"a review (after the handoff)", "coordinator", "coordinator-fans-out", coordinatorTools, map[string]ask{
			"Review the Acme Corp deal":                   {handedOff("Review the Acme Corp deal"), "Review the pricing of this deal: Review the Acme Corp deal"},
			"Can you look at the Acme Corp deal for me?":  {handedOff("Can you look at the Acme Corp deal for me?"), "Review the rollout of this deal"},
			"acme corp renewal, 35% off, thoughts?":       {handedOff("acme corp renewal, 35% off, thoughts?"), "Review the pricing of this deal"},
			"Please assess the Acme Corp deal, urgently.": {handedOff("Please assess the Acme Corp deal, urgently."), "Review the pricing of this deal"},
		}},
	}
	// The pricing reviewer, asked again by the coordinator with each
	// follow-up above, reads the new discount from it.
	for _, f := range flows[0].asks {
		req := "Review the pricing of this deal again, with this change: " + f.input[len(f.input)-1].Content
		flows[1].asks[req] = ask{[]agents.Item{agents.UserMessage(req), agents.FunctionCall("e1", "exec_command", `{"cmd":"cat deal/pricing.json"}`),
			agents.FunctionCallOutput("e1", "Process exited with code 0\nOutput:\n"+dealdesk.Documents["pricing"])}, "A 25% discount instead of 35%"}
	}
	for _, f := range flows {
		for msg, q := range f.asks {
			t.Run(f.flow+"/"+msg, func(t *testing.T) {
				rule, resp, err := a.Ask(f.agent, q.input, f.tools...)
				if err != nil {
					t.Fatalf("%q to the %s: %v", msg, f.agent, err)
				}
				if rule != f.rule {
					t.Errorf("%q to the %s: rule %s answered, want %s", msg, f.agent, rule, f.rule)
				}
				var got strings.Builder
				for _, it := range resp.Output {
					got.WriteString(it.Content + it.Name + it.Arguments + "\n")
				}
				if !strings.Contains(got.String(), q.want) {
					t.Errorf("%q to the %s: the answer %s lacks %q", msg, f.agent, got.String(), q.want)
				}
			})
		}
	}

	// A follow-up no flow knows finds no rule, rather than an answer made
	// up from the reviews of the last message.
	for _, msg := range []string{"thanks!", "What if the go-live were 8 weeks?"} {
		_, _, err := a.Ask("coordinator", append(reviewed[:4:4], agents.UserMessage(msg)), coordinatorTools...)
		if _, ok := model.ScenarioNoMatch(err); !ok {
			t.Errorf("%q to the coordinator: %v, want the scenario's no-match", msg, err)
		}
	}
}
