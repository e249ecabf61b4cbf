package workflows

// This file holds the delta relay: how the text deltas of a worker's model
// calls reach followers in other processes without a single event in any
// workflow's history. The worker serves its bus's deltas over HTTP and
// says where in its identity on the task queue; a follower that asks for
// deltas (WithDeltas) reads the identities of the queue's workers from
// Temporal and subscribes to each relay, for the run it follows. The
// package doc tells the whole story; this file is the mechanism.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// DefaultDeltaAddr is where a worker's delta relay listens unless
// Config.DeltaAddr says otherwise: loopback, on any free port.
const DefaultDeltaAddr = "127.0.0.1:0"

const (

	// relayBuffer bounds the deltas one relay subscriber (or a
	// follower's merge of relays) may be behind; beyond it they are
	// dropped, and the model call goes on.
	relayBuffer = 1024
	// maxRelaySubscribers bounds a relay's subscribers at once, so its
	// memory is bounded: at most this many buffers of relayBuffer.
	maxRelaySubscribers = 64
	// relayKeepAlive is how often a relay writes an empty line to an idle
	// subscriber, so a subscriber that went away is noticed.
	relayKeepAlive = 15 * time.Second
	// maxRelayLine bounds one line a follower reads from a relay.
	maxRelayLine = 1 << 20
	// relayDiscovery is how often a follower reads the task queue's
	// workers again, for relays that came up since.
	relayDiscovery = 2 * time.Second
	// relayHold bounds how long a follower holds a turn's model_turn
	// event back for the rest of the turn's deltas from a relay.
	relayHold = time.Second
)

// deltaRelay serves a bus's deltas over HTTP: GET /deltas?root=ID with
// basic auth (user "troupe", the token as password) answers with a line
// of JSON per delta (an Event) of the workflow ID and those whose ids
// start with "ID/" (its run's agents), as they come, until the subscriber
// goes away.
type deltaRelay struct {
	bus   *EventBus
	token string
	url   string // advertised, with its credentials
	srv   *http.Server
	refs  int // the workers that serve it (guarded by bus.mu)

	mu   sync.Mutex
	subs int
}

// serveDeltas has the bus's deltas served on addr (DefaultDeltaAddr when
// empty), or takes the relay a worker of this process started already,
// and returns its URL and a func that releases it: the last release stops
// it. A relay bound to an unspecified host (":7300") is advertised under
// host.
func (b *EventBus) ServeDeltas(addr, host string) (string, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.relay == nil {
		r, err := startRelay(b, addr, host)
		if err != nil {
			return "", nil, err
		}
		b.relay = r
	}
	r := b.relay
	r.refs++
	var once sync.Once
	return r.url, func() {
		once.Do(func() {
			b.mu.Lock()
			r.refs--
			last := r.refs == 0
			if last {
				b.relay = nil
			}
			b.mu.Unlock()
			if last {
				_ = r.srv.Close()
			}
		})
	}, nil
}

func startRelay(b *EventBus, addr, host string) (*deltaRelay, error) {
	if addr == "" {
		addr = DefaultDeltaAddr
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("delta relay: %w", err)
	}
	h, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(h); ip == nil || ip.IsUnspecified() {
		h = host
	}
	r := &deltaRelay{bus: b, token: hex.EncodeToString(secret)}
	u := url.URL{Scheme: "http", User: url.UserPassword(troupe.RelayUser, r.token), Host: net.JoinHostPort(h, port), Path: troupe.RelayPath}
	r.url = u.String()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 8 << 10}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// ServeHTTP answers a subscriber.
func (r *deltaRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	user, pass, ok := req.BasicAuth()
	if !ok || user != troupe.RelayUser || subtle.ConstantTimeCompare([]byte(pass), []byte(r.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="troupe deltas"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if req.URL.Path != troupe.RelayPath {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	root := req.URL.Query().Get("root")
	if root == "" {
		http.Error(w, "root: the workflow id of the run to follow is required", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	full := r.subs >= maxRelaySubscribers
	if !full {
		r.subs++
	}
	r.mu.Unlock()
	if full {
		http.Error(w, "too many subscribers", http.StatusServiceUnavailable)
		return
	}
	defer func() {
		r.mu.Lock()
		r.subs--
		r.mu.Unlock()
	}()
	deltas, unsubscribe := r.bus.Subscribe(root, false, true, relayBuffer)
	defer unsubscribe()
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// The subscriber knows it is subscribed once the headers are in.
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	keepAlive := time.NewTicker(relayKeepAlive)
	defer keepAlive.Stop()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-req.Context().Done():
			return
		case <-keepAlive.C:
			if _, err := w.Write([]byte("\n")); err != nil {
				return
			}
			flush()
		case e := <-deltas:
			// What queued meanwhile goes out in the same write.
			for more := true; more; {
				if err := enc.Encode(e); err != nil {
					return
				}
				select {
				case e = <-deltas:
				default:
					more = false
				}
			}
			flush()
		}
	}
}

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
					err := subscribeRelay(ctx, u, root, out)
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
	d, err := c.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range d.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) >= pollerFresh {
			continue
		}
		if u, _ := troupe.RelayOf(p.GetIdentity()); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// pollerFresh is how recently a worker must have polled for its relay to
// be tried: a worker keeps a poll open for up to a minute, and the server
// lists the pollers of the last minutes.
const pollerFresh = 75 * time.Second

// subscribeRelay reads the deltas of run root from the relay at u into
// out until the relay or ctx ends the stream. Its error says why the
// relay could not be read (nil when ctx ended it, or the relay closed the
// stream after answering).
func subscribeRelay(ctx context.Context, u, root string, out chan<- troupe.Event) error {
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
