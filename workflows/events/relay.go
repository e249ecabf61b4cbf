package events

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/troupe-dev/troupe"
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
)

// deltaRelay serves a bus's deltas over HTTP: GET /deltas?root=ID with
// basic auth (user "troupe", the token as password) answers with a line
// of JSON per delta (an Event) of the workflow ID and those whose ids
// start with "ID/" (its run's agents), as they come, until the subscriber
// goes away.
type deltaRelay struct {
	bus   *Bus
	token string
	url   string // advertised, with its credentials
	srv   *http.Server
	refs  int // the workers that serve it (guarded by bus.mu)

	mu   sync.Mutex
	subs int
}

func startRelay(b *Bus, addr, host string) (*deltaRelay, error) {
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
