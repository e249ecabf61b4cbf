package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	enums "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
)

// maxRelayLine bounds one line a follower reads from a relay.
const maxRelayLine = 1 << 20

// relayDiscovery is how often a follower reads the task queue's
// workers again, for relays that came up since.
const relayDiscovery = 2 * time.Second

// relayHold bounds how long a follower holds a turn's model_turn
// event back for the rest of the turn's deltas from a relay.
const relayHold = time.Second

// relayClient reads relays: a relay that does not answer soon is given
// up on (until the next try); one that does streams for as long as the
// follower follows.
var relayClient = &http.Client{Transport: &http.Transport{
	DialContext:           (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ResponseHeaderTimeout: 5 * time.Second,
	MaxIdleConnsPerHost:   4,
	Proxy:                 nil, // A relay is reached directly.
}}

// followRelays sends to out the deltas of the run root that the relays
// of its task queue's workers serve, until ctx is done: it reads the
// queue from the run's workflow, the relays from the identities of the
// queue's workers (those that polled in the last pollerFresh), and
// subscribes to each but own (this process's, whose deltas the follower
// takes from its bus), every relayDiscovery for new ones. A relay that
// cannot be reached is tried again later, less and less often; nothing
// is an error: without relays there are no deltas.
func followRelays(ctx context.Context, c client.Client, root, own string, out chan<- troupe.Event) {
	type relayState struct {
		active bool
		fails  int
		next   time.Time // when to try again after a failure
	}
	relays := map[string]*relayState{}
	ended := make(chan string)
	var queue string
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(relayDiscovery)
	defer tick.Stop()
	for {
		if queue == "" {
			if d, err := c.DescribeWorkflowExecution(ctx, root, ""); err == nil {
				queue = d.GetWorkflowExecutionInfo().GetTaskQueue()
			}
		}
		if queue != "" {
			for _, u := range queueRelays(ctx, c, queue) {
				st := relays[u]
				if st == nil {
					st = &relayState{}
					relays[u] = st
				}
				if u == own || st.active || time.Now().Before(st.next) {
					continue
				}
				st.active = true
				wg.Go(func() {
					err := SubscribeRelay(ctx, u, root, out)
					select {
					case ended <- u + "\x00" + errText(err):
					case <-ctx.Done():
					}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case msg := <-ended:
			u, failed, _ := strings.Cut(msg, "\x00")
			st := relays[u]
			st.active = false
			if failed != "" {
				st.fails++
				st.next = time.Now().Add(min(relayDiscovery<<min(st.fails, 5), time.Minute))
			} else {
				st.fails = 0
			}
		case <-tick.C:
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// queueRelays returns the relay URLs that the workers polling queue
// advertise, from those that polled in the last pollerFresh.
func queueRelays(ctx context.Context, c client.Client, queue string) []string {
	pollers, err := freshPollers(ctx, c, queue)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pollers {
		if u, _ := troupe.RelayOf(p.GetIdentity()); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// freshPollers returns the workers polling queue's workflow tasks whose
// last poll began within pollerFresh: those that may be up.
func freshPollers(ctx context.Context, c client.Client, queue string) ([]*taskqueuepb.PollerInfo, error) {
	d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, err
	}
	var fresh []*taskqueuepb.PollerInfo
	for _, p := range d.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh {
			fresh = append(fresh, p)
		}
	}
	return fresh, nil
}

// pollerFresh is how recently a worker must have polled for its relay to
// be tried: a worker keeps a poll open for up to a minute, and the server
// lists the pollers of the last minutes.
const pollerFresh = 75 * time.Second

// SubscribeRelay reads the deltas of run root from the relay at u into
// out until the relay or ctx ends the stream. Its error says why the
// relay could not be read (nil when ctx ended it, or the relay closed the
// stream after answering).
func SubscribeRelay(ctx context.Context, u, root string, out chan<- troupe.Event) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?root="+url.QueryEscape(root), nil)
	if err != nil {
		return err
	}
	resp, err := relayClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("relay answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, maxRelayLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue // keep-alive
		}
		var e troupe.Event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Kind != troupe.EventTextDelta && e.Kind != troupe.EventTextEnd ||
			e.WorkflowID != root && !strings.HasPrefix(e.WorkflowID, root+"/") {
			continue // not a delta of the run: not the follower's to see
		}
		e.Seq = 0
		select {
		case out <- e:
		case <-ctx.Done():
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("relay closed the stream")
}

// deltaOrder passes deltas and recorded events on to a follower's fn in
// an order that makes sense: a turn's deltas before the turn's model_turn
// event, and none after it. A delta of a turn whose model_turn went out
// already (a relay that lagged) is dropped; a model_turn whose deltas a
// relay is still bringing (seen, but not their end) is held until their
// end arrives, for at most hold (and not once done is closed: the
// follower is stopping, and its relays with it). Deltas reach fn with Seq
// 0, which a Cursor ignores.
type deltaOrder struct {
	fn      func(troupe.Event)
	relayed <-chan troupe.Event // nil: no relay, nothing to wait for
	hold    time.Duration
	done    <-chan struct{}
	// open are the turns whose deltas came and whose end did not;
	// recorded holds each workflow's last turn whose model_turn went out.
	open     map[turnKey]bool
	recorded map[string]int
}

type turnKey struct {
	workflow string
	turn     int
}

func newDeltaOrder(fn func(troupe.Event), relayed <-chan troupe.Event, hold time.Duration, done <-chan struct{}) *deltaOrder {
	return &deltaOrder{fn: fn, relayed: relayed, hold: hold, done: done, open: map[turnKey]bool{}, recorded: map[string]int{}}
}

// delta takes a delta or a delta's end, from the bus or a relay.
func (o *deltaOrder) delta(e troupe.Event) {
	if e.Turn <= o.recorded[e.WorkflowID] {
		return // Its turn is recorded: too late to show.
	}
	k := turnKey{e.WorkflowID, e.Turn}
	switch e.Kind {
	case troupe.EventTextEnd:
		delete(o.open, k)
	case troupe.EventTextDelta:
		o.open[k] = true
		e.Seq = 0
		o.fn(e)
	}
}

// event passes on an event that a workflow recorded, once the deltas of
// its turn are in when it is a model_turn.
func (o *deltaOrder) event(e troupe.Event) {
	if e.Kind == troupe.EventTurn {
		k := turnKey{e.WorkflowID, e.Turn}
		if o.open[k] && o.relayed != nil {
			t := time.NewTimer(o.hold)
		wait:
			for o.open[k] {
				select {
				case d := <-o.relayed:
					o.delta(d)
				case <-t.C:
					break wait
				case <-o.done:
					break wait
				}
			}
			t.Stop()
		}
		delete(o.open, k)
		o.recorded[e.WorkflowID] = max(o.recorded[e.WorkflowID], e.Turn)
	}
	o.fn(e)
}
