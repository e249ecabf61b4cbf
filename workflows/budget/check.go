package budget

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
)

// OrNil is b, or nil for a budget that limits nothing.
func OrNil(b agents.Budget) *agents.Budget {
	if !b.Limits() {
		return nil
	}
	return &b
}

// Check reports why a run of spec cannot keep budget b (nil: no
// budget): a negative limit, or a cost limit with a model of the graph
// that has no price.
func Check(spec *runtime.GraphSpec, b *agents.Budget) error {
	if b == nil {
		return nil
	}
	if err := b.Check(); err != nil {
		return err
	}
	switch {
	case b.Cost == 0:
	case len(spec.Prices) == 0:
		return fmt.Errorf("%w: the budget limits cost, but graph %s has no prices: give it some (agents.Graph.WithPrices, or the worker's Config.Prices)",
			agents.ErrInvalidBudget, spec.Graph)
	case len(spec.Unpriced) > 0:
		return fmt.Errorf("%w: the budget limits cost, but model(s) %s of graph %s have no price: add them to the graph's prices (agents.Graph.WithPrices) or the worker's (Config.Prices)",
			agents.ErrInvalidBudget, strings.Join(spec.Unpriced, ", "), spec.Graph)
	}
	return nil
}

// Prices is the price table of g's runs: the graph's and the worker's
// (worker),
// (which wins), for the models g's agents use, and those models without
// a price; both nil without a price table.
func Prices(g *agents.Graph, worker agents.Prices, defaultModel string) (agents.Prices, []string) {
	graph := g.Prices()
	if len(graph) == 0 && len(worker) == 0 {
		return nil, nil
	}
	var models []string
	for _, a := range g.Agents() {
		if m := cmp.Or(a.Model, defaultModel); !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	prices, unpriced := agents.Prices{}, []string(nil)
	for _, m := range models {
		if p, ok := worker[m]; ok {
			prices[m] = p
		} else if p, ok := graph[m]; ok {
			prices[m] = p
		} else {
			unpriced = append(unpriced, m)
		}
	}
	return prices, unpriced
}

// WithBudget is g with its default budget and prices, taken before the
// runner rebuilt it, checked: NewRunner refuses a budget the graph's
// runs could not keep.
func WithBudget(g *agents.Graph, budget *agents.Budget, prices, worker agents.Prices, defaultModel string) (*agents.Graph, error) {
	if err := errors.Join(worker.Check(), prices.Check()); err != nil {
		return nil, fmt.Errorf("workflows: graph %s: %w", g.Name(), err)
	}
	if prices != nil {
		g = g.WithPrices(prices)
	}
	if budget == nil {
		return g, nil
	}
	g = g.WithBudget(*budget)
	spec := &runtime.GraphSpec{Graph: g.Name()}
	spec.Prices, spec.Unpriced = Prices(g, worker, defaultModel)
	if err := Check(spec, budget); err != nil {
		return nil, fmt.Errorf("workflows: graph %s: %w", g.Name(), err)
	}
	return g, nil
}
