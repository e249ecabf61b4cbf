package troupe

import (
	"fmt"
	"os"
	"strings"
)

// The delta relay: a worker serves the text deltas of its model calls over
// HTTP (GET RelayPath?root=RUN, basic auth RelayUser and a token, a line
// of JSON per Event) and advertises the URL in its identity on its task
// queue (WithRelay); a follower reads the identities of the queue's
// pollers and subscribes to each relay it finds (RelayOf).

// EventTextEnd ends the deltas of one model call: the relay carries it
// after a call's last delta, so a follower knows the deltas of a turn are
// all in before it passes the turn's model_turn event on. Followers'
// funcs never see it.
const EventTextEnd = "text_end"

const (
	// RelayUser is the user name of a relay's basic auth; its password is
	// the relay's token.
	RelayUser = "troupe"
	// RelayPath is where a relay serves.
	RelayPath = "/deltas"
	// relayField marks the relay's URL in a worker's identity.
	relayField = " deltas="
)

// WithRelay is a worker identity that advertises the relay at url:
// identity (or, when empty, the SDK's default, PID@HOST@) followed by
// " deltas=URL".
func WithRelay(identity, url string) string {
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s@", os.Getpid(), host)
	}
	return identity + relayField + url
}

// RelayOf returns the delta relay URL that a worker identity advertises
// (with its token), or "" for none; and the identity without it (nor the
// mark of WithInputRefs).
func RelayOf(identity string) (url, rest string) {
	identity = withoutInputRefs(identity)
	i := strings.LastIndex(identity, relayField)
	if i < 0 {
		return "", identity
	}
	u := identity[i+len(relayField):]
	if j := strings.IndexByte(u, ' '); j >= 0 {
		u = u[:j]
	}
	return u, identity[:i]
}
