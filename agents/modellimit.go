package agents

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// ModelLimit bounds the calls to one model endpoint (a base URL and a
// model name): how many may run at once and how many may start in any
// window of Per. Every worker of a task queue shares the limit (the
// workers' runner hands each its share; see workflows.Config.ModelLimits),
// so it holds for the endpoint as a whole, not per worker. A zero field
// limits nothing, so the zero ModelLimit limits nothing.
type ModelLimit struct {
	// MaxConcurrent bounds the calls in flight at once.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// Requests bounds the calls that start in any window of Per.
	Requests int `json:"requests,omitempty"`
	// Per is the window of Requests; the default is one second. Providers
	// that count requests per minute take Per: time.Minute.
	Per time.Duration `json:"per,omitempty"`
}

// Limits reports whether l limits anything.
func (l ModelLimit) Limits() bool { return l.MaxConcurrent > 0 || l.Requests > 0 }

// Window is Per, or one second when Per is not set.
func (l ModelLimit) Window() time.Duration {
	if l.Per <= 0 {
		return time.Second
	}
	return l.Per
}

// ErrInvalidModelLimit reports a model limit that cannot be kept.
var ErrInvalidModelLimit = errors.New("agents: invalid model limit")

// Check reports a negative field.
func (l ModelLimit) Check() error {
	var errs []string
	if l.MaxConcurrent < 0 {
		errs = append(errs, fmt.Sprintf("max_concurrent is negative (%d)", l.MaxConcurrent))
	}
	if l.Requests < 0 {
		errs = append(errs, fmt.Sprintf("requests is negative (%d)", l.Requests))
	}
	if l.Per < 0 {
		errs = append(errs, fmt.Sprintf("per is negative (%s)", l.Per))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidModelLimit, strings.Join(errs, "; "))
	}
	return nil
}

// Stricter returns the tighter of l and o on each dimension: a limit set
// in either holds, the lower of two holds. The two windows are compared
// as rates (Requests per Per), and the stricter's window is kept.
func (l ModelLimit) Stricter(o ModelLimit) ModelLimit {
	out := l
	if o.MaxConcurrent > 0 && (out.MaxConcurrent == 0 || o.MaxConcurrent < out.MaxConcurrent) {
		out.MaxConcurrent = o.MaxConcurrent
	}
	if o.Requests > 0 && (out.Requests == 0 ||
		float64(o.Requests)/o.Window().Seconds() < float64(out.Requests)/out.Window().Seconds()) {
		out.Requests, out.Per = o.Requests, o.Per
	}
	return out
}

// String says what l limits ("50 concurrent, 100 per 1s"), or "none".
func (l ModelLimit) String() string {
	var parts []string
	if l.MaxConcurrent > 0 {
		parts = append(parts, fmt.Sprintf("%d concurrent", l.MaxConcurrent))
	}
	if l.Requests > 0 {
		parts = append(parts, fmt.Sprintf("%d per %s", l.Requests, l.Window()))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// WithModelLimits returns a copy of g that limits the calls of its agents
// to the models named (the key "" limits every model): a worker serving g
// keeps each model endpoint within the stricter of this limit and its
// own (workflows.Config.ModelLimits), with every worker of its task queue.
func (g *Graph) WithModelLimits(limits map[string]ModelLimit) *Graph {
	c := *g
	c.modelLimits = maps.Clone(limits)
	return &c
}

// ModelLimits is the graph's model limits (WithModelLimits), or nil.
func (g *Graph) ModelLimits() map[string]ModelLimit { return maps.Clone(g.modelLimits) }
