package throttle

// This file holds the limiter workflow: the record of the leases on one
// endpoint's limit, and the sharing of the limit among them.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
)

// Names of the limiter workflow and its update.
const (
	LimiterWorkflowName = "troupe.ModelLimiter"
	RenewUpdateName     = "troupe.ModelLimiter.renew"
)

// LeaseTTL is how long a share lasts from the renewal that took it.
const LeaseTTL = 20 * time.Second

// reclaimGrace is added to LeaseTTL and the window before the limiter
// gives a silent worker's share to others: the clocks of worker and
// server may run at slightly different rates.
const reclaimGrace = 2 * time.Second

// ContinueAfterRenewals is how many renewals one run of a limiter
// workflow takes before it continues as new.
const ContinueAfterRenewals = 1000

// idleEnd is how long a limiter with no holder lives on.
const idleEnd = time.Hour

// Unlimited is a share's value on a dimension its limit does not bound.
const Unlimited = -1

// LimiterID is the workflow id of the limiter of endpoint on queue.
func LimiterID(queue, endpoint string) string {
	sum := sha256.Sum256([]byte(endpoint))
	return "troupe-model-limiter-" + queue + "-" + hex.EncodeToString(sum[:8])
}

// Endpoint names a model endpoint: the base URL and the model.
func Endpoint(baseURL, model string) string {
	return strings.TrimSuffix(baseURL, "/") + " " + model
}

// LimiterState is a limiter's record, carried through continue-as-new.
type LimiterState struct {
	// Endpoint is the endpoint whose limit it holds.
	Endpoint string `json:"endpoint"`
	// Holders are the workers holding a lease, by ID.
	Holders []Holder `json:"holders,omitempty"`
	// Idle is when the last holder left (zero while some hold a lease).
	Idle time.Time `json:"idle,omitzero"`
}

// Holder is one worker's lease.
type Holder struct {
	// ID names the worker (a fresh id per process and endpoint).
	ID string `json:"id"`
	// Limit is the limit the worker keeps the endpoint within: the limiter
	// keeps the stricter of its holders'.
	Limit agents.ModelLimit `json:"limit"`
	// Seen is when its last renewal came.
	Seen time.Time `json:"seen"`
	// Calls and Starts are what it may use until its next renewal:
	// calls at once, and starts in a window.
	Calls  int `json:"calls"`
	Starts int `json:"starts"`
	// WantCalls and WantStarts are its demand, as of its last renewal.
	WantCalls  int `json:"want_calls"`
	WantStarts int `json:"want_starts"`
}

// RenewRequest is a worker's renewal of its lease.
type RenewRequest struct {
	Holder string            `json:"holder"`
	Limit  agents.ModelLimit `json:"limit"`
	// Calls and Starts are the share the worker enforces now (its last
	// grant; Unlimited for none), InFlight and Recent what it uses: calls
	// in flight, starts in its window.
	Calls    int `json:"calls"`
	Starts   int `json:"starts"`
	InFlight int `json:"in_flight"`
	Recent   int `json:"recent"`
	// WantCalls and WantStarts are its demand: calls in flight or
	// waiting, and starts in its window or waiting.
	WantCalls  int `json:"want_calls"`
	WantStarts int `json:"want_starts"`
	// Release gives the lease back: the worker uses the endpoint no more.
	Release bool `json:"release,omitempty"`
}

// Grant is a worker's share, the limiter's answer to a renewal.
type Grant struct {
	// Calls and Starts are the share: calls at once, starts in a window
	// of Limit; Unlimited where the limit bounds nothing.
	Calls  int `json:"calls"`
	Starts int `json:"starts"`
	// Limit is the limit in force: the stricter of the holders'.
	Limit agents.ModelLimit `json:"limit"`
	// TTL is how long the share lasts from the renewal.
	TTL time.Duration `json:"ttl"`
	// RenewIn, when set, asks for the next renewal sooner than
	// RenewEvery: shares are moving between workers, and this one waits
	// for its part or holds more than its part.
	RenewIn time.Duration `json:"renew_in,omitempty"`
}

// renewSoon is the RenewIn of a worker whose share is moving.
const renewSoon = 100 * time.Millisecond

// LimiterWorkflow holds the leases on one endpoint's limit and answers
// renewals (RenewUpdateName) with shares. See the package doc.
func LimiterWorkflow(ctx workflow.Context, st LimiterState) error {
	renewals := 0
	if err := workflow.SetUpdateHandlerWithOptions(ctx, RenewUpdateName,
		func(ctx workflow.Context, req RenewRequest) (Grant, error) {
			renewals++
			return st.Renew(workflow.Now(ctx), req), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req RenewRequest) error { return req.check() }},
	); err != nil {
		return err
	}
	for {
		full, err := workflow.AwaitWithTimeout(ctx, idleEnd, func() bool {
			return renewals >= ContinueAfterRenewals || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		})
		if err != nil {
			return err
		}
		st.expire(workflow.Now(ctx))
		idle := len(st.Holders) == 0 && !st.Idle.IsZero() && workflow.Now(ctx).Sub(st.Idle) >= idleEnd
		if !full && !idle {
			continue
		}
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		if idle && len(st.Holders) == 0 {
			return nil
		}
		return workflow.NewContinueAsNewError(ctx, LimiterWorkflowName, st)
	}
}

func (r RenewRequest) check() error {
	var errs []error
	if r.Holder == "" {
		errs = append(errs, errors.New("no holder"))
	}
	if err := r.Limit.Check(); err != nil {
		errs = append(errs, err)
	}
	if r.InFlight < 0 || r.Recent < 0 || r.WantCalls < 0 || r.WantStarts < 0 {
		errs = append(errs, errors.New("negative count"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("throttle: renewal: %w", err)
	}
	return nil
}

// expire drops the holders the limiter has not heard of for LeaseTTL,
// their window and reclaimGrace: their shares are free again.
func (st *LimiterState) expire(now time.Time) {
	n := len(st.Holders)
	st.Holders = slices.DeleteFunc(st.Holders, func(h Holder) bool {
		return now.Sub(h.Seen) > LeaseTTL+h.Limit.Window()+reclaimGrace
	})
	if n > 0 && len(st.Holders) == 0 {
		st.Idle = now
	}
}

// Renew takes a worker's renewal at now and returns its share: its fair
// part of the limit by demand, but never more than the limit less what
// the other holders may use until their next renewals.
func (st *LimiterState) Renew(now time.Time, req RenewRequest) Grant {
	st.expire(now)
	i, found := slices.BinarySearchFunc(st.Holders, req.Holder, func(h Holder, id string) int { return strings.Compare(h.ID, id) })
	if req.Release {
		if found {
			st.Holders = slices.Delete(st.Holders, i, i+1)
			if len(st.Holders) == 0 {
				st.Idle = now
			}
		}
		return Grant{Calls: 0, Starts: 0, Limit: req.Limit, TTL: LeaseTTL}
	}
	if !found {
		// A new holder may use nothing yet.
		st.Holders = slices.Insert(st.Holders, i, Holder{ID: req.Holder})
	}
	st.Idle = time.Time{}
	h := &st.Holders[i]
	h.Limit, h.Seen = req.Limit, now
	h.WantCalls, h.WantStarts = req.WantCalls, req.WantStarts
	limit := st.limit()

	g := Grant{Calls: Unlimited, Starts: Unlimited, Limit: limit, TTL: LeaseTTL}
	moving := false
	if limit.MaxConcurrent > 0 {
		var fair int
		g.Calls, fair = st.share(i, limit.MaxConcurrent,
			func(h Holder) int { return h.WantCalls }, func(h Holder) int { return h.Calls })
		moving = g.Calls != fair || req.Calls > fair
	}
	if limit.Requests > 0 {
		var fair int
		g.Starts, fair = st.share(i, limit.Requests,
			func(h Holder) int { return h.WantStarts }, func(h Holder) int { return h.Starts })
		moving = moving || g.Starts != fair || req.Starts > fair
	}
	// Until its next renewal the worker may use the most of what it
	// enforced, what it uses, and its new share.
	h.Calls = max(bound(req.Calls, limit.MaxConcurrent), req.InFlight, bound(g.Calls, limit.MaxConcurrent))
	h.Starts = max(bound(req.Starts, limit.Requests), req.Recent, bound(g.Starts, limit.Requests))
	if moving {
		g.RenewIn = renewSoon
	}
	return g
}

// bound is a share counted against a limit: Unlimited counts as the whole
// limit.
func bound(share, limit int) int {
	if share == Unlimited {
		return limit
	}
	return share
}

// limit is the stricter of the holders' limits.
func (st *LimiterState) limit() agents.ModelLimit {
	var l agents.ModelLimit
	for _, h := range st.Holders {
		l = l.Stricter(h.Limit)
	}
	return l
}

// share is holder i's share of total: its max-min fair part by demand
// (want), the rest spread over the holders that want any (fair), capped
// by what the others may use (held).
func (st *LimiterState) share(i, total int, want, held func(Holder) int) (share, fair int) {
	fairs := fairShares(total, st.Holders, want)
	free := total
	for j, h := range st.Holders {
		if j != i {
			free -= held(h)
		}
	}
	return max(0, min(fairs[i], free)), fairs[i]
}

// fairShares divides total among holders by their demands, max-min fair
// (water-filling: no holder gets more than it wants while another gets
// less than its equal part), then spreads what is left over those that
// want any, in id order for the odd ones. Integer parts, summing to at
// most total.
func fairShares(total int, holders []Holder, want func(Holder) int) []int {
	n := len(holders)
	out := make([]int, n)
	left := total
	open := make([]int, 0, n)
	for j, h := range holders {
		if want(h) > 0 {
			open = append(open, j)
		}
	}
	for left > 0 && len(open) > 0 {
		each := left / len(open)
		if each == 0 {
			for _, j := range open[:left] {
				out[j]++
			}
			left = 0
			break
		}
		next := open[:0]
		for _, j := range open {
			give := min(each, want(holders[j])-out[j])
			out[j] += give
			left -= give
			if out[j] < want(holders[j]) {
				next = append(next, j)
			}
		}
		open = next
	}
	// Room no one wants now goes to those that want any, for their next
	// burst.
	var wanting []int
	for j, h := range holders {
		if want(h) > 0 {
			wanting = append(wanting, j)
		}
	}
	if len(wanting) > 0 {
		each, odd := left/len(wanting), left%len(wanting)
		for k, j := range wanting {
			out[j] += each
			if k < odd {
				out[j]++
			}
		}
	}
	return out
}
