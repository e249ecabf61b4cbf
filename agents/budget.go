package agents

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
)

// Budget limits what a run, or a session over all its turns, spends on
// model calls, across its whole tree of agents: the agents of its chain of
// handoffs and every agent they run as a tool, in parallel or not. A zero
// field sets no limit, so the zero Budget limits nothing.
//
// Once a limit is reached no model call starts anywhere in the tree: the
// agent about to call the model fails with troupe.BudgetExceeded, which
// ends the run (a session's turn). Calls that started before (in agents
// working in parallel) finish and count, so what a run spends can pass a
// token or cost limit by what those calls took; a ModelCalls limit is
// never passed.
type Budget struct {
	// InputTokens bounds the input tokens of the tree's model calls
	// (cached input tokens included).
	InputTokens int64 `json:"input_tokens,omitempty"`
	// OutputTokens bounds their output tokens (reasoning included).
	OutputTokens int64 `json:"output_tokens,omitempty"`
	// ModelCalls bounds the model calls: each turn's call counts once,
	// its retries (a model that did not answer) included.
	ModelCalls int64 `json:"model_calls,omitempty"`
	// Cost bounds the cost of the calls, in the currency of the price
	// table (Prices) that prices them. A cost limit needs a price for
	// every model the graph's agents use.
	Cost float64 `json:"cost,omitempty"`
}

// Limits reports whether the budget limits anything.
func (b Budget) Limits() bool {
	return b.InputTokens != 0 || b.OutputTokens != 0 || b.ModelCalls != 0 || b.Cost != 0
}

// ErrInvalidBudget reports a budget or a price that cannot be kept.
var ErrInvalidBudget = errors.New("agents: invalid budget")

// Check reports a negative or non-finite limit.
func (b Budget) Check() error {
	var errs []error
	for _, l := range []struct {
		name string
		v    int64
	}{{"input_tokens", b.InputTokens}, {"output_tokens", b.OutputTokens}, {"model_calls", b.ModelCalls}} {
		if l.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative (%d)", l.name, l.v))
		}
	}
	if b.Cost < 0 || math.IsNaN(b.Cost) || math.IsInf(b.Cost, 0) {
		errs = append(errs, fmt.Errorf("cost is %v", b.Cost))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidBudget, errors.Join(errs...))
	}
	return nil
}

// String lists the limits, as the budget command takes them
// ("cost=0.5 model_calls=40"), or "off" for none.
func (b Budget) String() string {
	var parts []string
	if b.Cost != 0 {
		parts = append(parts, "cost="+strconv.FormatFloat(b.Cost, 'f', -1, 64))
	}
	if b.ModelCalls != 0 {
		parts = append(parts, "model_calls="+strconv.FormatInt(b.ModelCalls, 10))
	}
	if b.InputTokens != 0 {
		parts = append(parts, "input_tokens="+strconv.FormatInt(b.InputTokens, 10))
	}
	if b.OutputTokens != 0 {
		parts = append(parts, "output_tokens="+strconv.FormatInt(b.OutputTokens, 10))
	}
	if len(parts) == 0 {
		return "off"
	}
	return strings.Join(parts, " ")
}

// Change returns b changed as arg says: NAME=VALUE pairs, separated by
// spaces or commas, for the limits input_tokens, output_tokens,
// model_calls and cost (0 lifts that limit; the limits arg does not name
// keep their values), or "off", which lifts them all.
func (b Budget) Change(arg string) (Budget, error) {
	fields := strings.FieldsFunc(arg, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(fields) == 0 {
		return b, fmt.Errorf("%w: name a limit (cost=, model_calls=, input_tokens=, output_tokens=) or off", ErrInvalidBudget)
	}
	if len(fields) == 1 && fields[0] == "off" {
		return Budget{}, nil
	}
	for _, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			return b, fmt.Errorf("%w: %q: want NAME=VALUE (cost=, model_calls=, input_tokens=, output_tokens=) or off", ErrInvalidBudget, f)
		}
		var err error
		switch name {
		case "cost":
			b.Cost, err = strconv.ParseFloat(value, 64)
		case "model_calls":
			b.ModelCalls, err = strconv.ParseInt(value, 10, 64)
		case "input_tokens":
			b.InputTokens, err = strconv.ParseInt(value, 10, 64)
		case "output_tokens":
			b.OutputTokens, err = strconv.ParseInt(value, 10, 64)
		default:
			return b, fmt.Errorf("%w: unknown limit %q (want cost, model_calls, input_tokens or output_tokens)", ErrInvalidBudget, name)
		}
		if err != nil {
			return b, fmt.Errorf("%w: %s: %q is not a number", ErrInvalidBudget, name, value)
		}
	}
	return b, b.Check()
}

// Price is what a model's calls cost, per million tokens, in the currency
// of its table.
type Price struct {
	// InputPerMTok prices input tokens; CachedInputPerMTok the input
	// tokens the provider served from its prompt cache (0: priced as
	// other input tokens).
	InputPerMTok       float64 `json:"input_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty"`
	// OutputPerMTok prices output tokens.
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Cost is what a call of input tokens (cachedInput of them from the
// prompt cache) and output tokens costs.
func (p Price) Cost(input, cachedInput, output int) float64 {
	cached := p.CachedInputPerMTok
	if cached == 0 {
		cached = p.InputPerMTok
	}
	cachedInput = min(max(cachedInput, 0), input)
	return (float64(input-cachedInput)*p.InputPerMTok + float64(cachedInput)*cached + float64(output)*p.OutputPerMTok) / 1e6
}

// Prices is a price table: the price of each model, by the name agents
// give it (Agent.Model, or the worker's default model).
type Prices map[string]Price

// Check reports a negative or non-finite price.
func (p Prices) Check() error {
	var errs []error
	for m, pr := range p {
		for _, v := range []float64{pr.InputPerMTok, pr.CachedInputPerMTok, pr.OutputPerMTok} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("model %q: price %v", m, v))
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidBudget, errors.Join(errs...))
	}
	return nil
}

// WithBudget returns a copy of g whose runs and sessions have budget b,
// unless they start with one of their own. The budget is fixed for a run
// when it starts; a session's can be changed by its budget command.
func (g *Graph) WithBudget(b Budget) *Graph {
	c := *g
	c.budget = &b
	return &c
}

// WithPrices returns a copy of g that prices its agents' model calls with
// prices (a worker's Config.Prices add to them and win for the models
// both name). The prices a run uses are fixed when it starts.
func (g *Graph) WithPrices(prices Prices) *Graph {
	c := *g
	c.prices = maps.Clone(prices)
	return &c
}

// Budget is the graph's default budget (WithBudget), or nil.
func (g *Graph) Budget() *Budget {
	if g.budget == nil {
		return nil
	}
	b := *g.budget
	return &b
}

// Prices is the graph's price table (WithPrices), or nil.
func (g *Graph) Prices() Prices { return maps.Clone(g.prices) }
