// Package dealdesk is Troupe's deal-desk example: a triage agent hands a
// deal off to a coordinator, which calls a pricing reviewer and a rollout
// reviewer as agents-as-tools in parallel. Each reviewer is a sandbox
// agent: its own workspace holds the deal's documents, which it reads with
// exec_command, and it returns a typed Review. The coordinator synthesises
// a typed Recommendation. The coordinator has memory (scope MemoryScope):
// each review it answers is a rollout that the memory workflow
// consolidates in the background, so a later review of the same customer,
// in another session, knows the decisions made before.
//
// Scenario is the offline script for the scripted model server, so the
// whole flow runs with no LLM: `troupe run --graph dealdesk "..."`.
//
// The graph has a price table (Prices) and a cost budget (Budget): a
// review stays well under it, and a runaway fan-out ("Review every deal
// in the pipeline", in the scenario) fails with troupe.BudgetExceeded
// once it is spent, with the usage and cost of each agent.
package dealdesk

import (
	_ "embed"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Scenario is the offline scenario of the graph, for the scripted model.
//
//go:embed scenario.yaml
var Scenario []byte

// Review is a reviewer's typed verdict.
type Review struct {
	// RiskLevel is low, medium or high.
	RiskLevel string `json:"risk_level" jsonschema:"enum=low,enum=medium,enum=high"`
	// Findings are the reviewer's observations.
	Findings []string `json:"findings"`
	// Blockers are what must change before the deal can be approved.
	Blockers []string `json:"blockers"`
}

// Recommendation is the coordinator's typed decision.
type Recommendation struct {
	// Decision is approve, approve_with_conditions or reject.
	Decision string `json:"decision" jsonschema:"enum=approve,enum=approve_with_conditions,enum=reject"`
	// PricingRisk and RolloutRisk repeat the reviewers' risk levels.
	PricingRisk string `json:"pricing_risk" jsonschema:"enum=low,enum=medium,enum=high"`
	RolloutRisk string `json:"rollout_risk" jsonschema:"enum=low,enum=medium,enum=high"`
	// Conditions must hold for the deal to go ahead.
	Conditions []string `json:"conditions"`
	// Summary explains the decision in a few sentences.
	Summary string `json:"summary"`
}

// Documents are the deal's documents, by name.
var Documents = map[string]string{
	"pricing": `{"customer":"Acme Corp","list_price_usd":480000,"discount_pct":35,"payment_terms":"net-90","term_years":3,"guideline":"discounts above 20% need CFO approval; payment terms above net-60 need finance approval"}`,
	"rollout": `{"customer":"Acme Corp","seats":5000,"go_live_weeks":3,"sso_required":true,"dedicated_csm":false,"guideline":"rollouts above 1000 seats need at least 8 weeks and a dedicated CSM"}`,
}

// reviewer is a sandbox agent whose workspace holds one deal document.
func reviewer(name, doc, instructions string) *agents.Agent {
	return &agents.Agent{
		Name:         name,
		Instructions: instructions,
		Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "deal/" + doc + ".json", Content: Documents[doc]}},
		}},
		Output: agents.MustOutput[Review](),
	}
}

// MemoryScope is the coordinator's memory scope: what it learns of each
// customer's decisions, shared by every session and run of the graph.
const MemoryScope = "dealdesk"

// Prices are OpenAI's list prices in US dollars per million tokens, for
// the models the deal desk may run on (gpt-4.1 by default).
var Prices = agents.Prices{
	"gpt-4.1":      {InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8},
	"gpt-4.1-mini": {InputPerMTok: 0.4, CachedInputPerMTok: 0.1, OutputPerMTok: 1.6},
	"gpt-4.1-nano": {InputPerMTok: 0.1, CachedInputPerMTok: 0.025, OutputPerMTok: 0.4},
	"gpt-4o":       {InputPerMTok: 2.5, CachedInputPerMTok: 1.25, OutputPerMTok: 10},
	"gpt-4o-mini":  {InputPerMTok: 0.15, CachedInputPerMTok: 0.075, OutputPerMTok: 0.6},
}

// Budget is the graph's default budget: what a run, or a session over all
// its turns, may spend on model calls, in the dollars of Prices. A review
// costs about a cent (seven calls, some 5,000 tokens, offline); the budget
// stops a runaway, such as a coordinator that fans out round after round,
// at a quarter. A run or session can set its own (RunInput.Budget,
// SessionInput.Budget), and a session's budget command raises it.
var Budget = agents.Budget{Cost: 0.25}

// Graph returns the deal-desk graph; its entry agent is triage. Its runs
// and sessions are priced by Prices and kept within Budget.
func Graph() *agents.Graph {
	return graph().WithPrices(Prices).WithBudget(Budget)
}

func graph() *agents.Graph {
	return agents.MustGraph("dealdesk", "triage",
		&agents.Agent{
			Name: "triage",
			Instructions: "You are the deal-desk triage agent. If the user asks for a review of a deal, " +
				"hand off to the coordinator. Otherwise answer briefly.",
			Handoffs: []agents.Handoff{agents.HandoffTo("coordinator")},
		},
		&agents.Agent{
			Name:               "coordinator",
			HandoffDescription: "Coordinates the pricing and rollout reviews of a deal and recommends a decision.",
			Expose: agents.Expose("", "Reviews a sales deal (pricing and rollout, in parallel) and recommends approve, "+
				"approve with conditions, or reject. Input: the deal in plain language."),
			Instructions: "You are the deal-desk coordinator. Call review_pricing and review_rollout in parallel, " +
				"then recommend a decision that repeats both risk levels and lists every blocker as a condition. " +
				"When your memory holds earlier decisions for the same customer, say what was decided before.",
			Tools: []agents.Tool{
				agents.AsTool("pricing_reviewer", "review_pricing", "Reviews the deal's pricing and payment terms."),
				agents.AsTool("rollout_reviewer", "review_rollout", "Reviews the deal's rollout plan."),
			},
			Output: agents.MustOutput[Recommendation](),
			Memory: &agents.MemoryConfig{Scope: MemoryScope},
		},
		reviewer("pricing_reviewer", "pricing", "You are the deal-desk pricing reviewer. The deal's documents are in your "+
			"workspace under deal/. Read deal/pricing.json with exec_command and review discount and payment terms against its guideline."),
		reviewer("rollout_reviewer", "rollout", "You are the deal-desk rollout reviewer. The deal's documents are in your "+
			"workspace under deal/. Read deal/rollout.json with exec_command and review seats, timeline and support against its guideline."),
	)
}
