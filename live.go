package troupe

import (
	"fmt"
	"os"
	"strings"
)

// The live feed: each worker process serves, through Temporal itself,
// what its workflows record and the text deltas of its model calls, as
// they come, to followers in other processes and on other hosts. It opens
// no port: a follower asks the process's feed workflow (LiveWorkflowName,
// a workflow that completes at once on a task queue only that process
// polls) the LiveQuery query, and the process answers from its event bus.
// A query costs no history event. The process advertises its feed's
// workflow id in its workers' identity (WithLiveFeed), where a follower
// reads it from the pollers of the run's task queue (LiveFeedOf).

// EventTextEnd ends the deltas of one model call: the feed carries it
// after a call's last delta, so a follower knows the deltas of a turn are
// all in before it passes the turn's model_turn event on. Followers'
// funcs never see it.
const EventTextEnd = "text_end"

// EventLiveText is the kind of the notice a follower that asked for text
// deltas (client.WithDeltas) passes its func when it cannot get them from
// some worker of the run (Detail says which and why): the turns that
// worker runs then show when they end, as they would without deltas. It is
// never recorded and has Seq 0.
const EventLiveText = "live_text"

const (
	// LiveWorkflowName is the workflow type of a worker process's live
	// feed.
	LiveWorkflowName = "troupe.LiveFeed"
	// LiveQuery is the query a live feed answers: a LiveRequest in, a
	// LivePage out.
	LiveQuery = "troupe.live"
	// LiveMaxWait bounds how long a feed holds a LiveRequest that finds
	// nothing new.
	LiveMaxWait = 5000 // ms
	// liveField marks the live feed's workflow id in a worker's identity.
	liveField = " live="
	// relayField marked the delta relay's URL in the identity of the
	// workers of before the live feed; LiveFeedOf drops it.
	relayField = " deltas="
)

// LiveRequest asks a live feed what it has for a run since a follower's
// last page.
type LiveRequest struct {
	// Root is the workflow id of the run or session followed: the feed
	// answers what its workflow and those whose ids start with "Root/"
	// record, and their deltas.
	Root string `json:"root"`
	// Watch and After are where the follower stands: the watch of its
	// last page and the number of the last item it took ("" and 0 at
	// first).
	Watch string `json:"watch,omitempty"`
	After uint64 `json:"after,omitempty"`
	// Deltas asks for text deltas (EventTextDelta, EventTextEnd) besides
	// recorded events.
	Deltas bool `json:"deltas,omitempty"`
	// WaitMS is how long the feed may hold the request while it has
	// nothing new (at most LiveMaxWait; 0 answers at once).
	WaitMS int `json:"wait_ms,omitempty"`
}

// LivePage is a live feed's answer to a LiveRequest.
type LivePage struct {
	// Watch names the feed's watch of the run: a follower sends it back.
	// A watch starts at the first request for a run and ends after a
	// while with none; a page of another watch than the request's starts
	// that watch's items from its first.
	Watch string `json:"watch"`
	// Next is the number of the last item of the page (After when none).
	Next uint64 `json:"next"`
	// Events are the items, in the order the process published them:
	// events as their workflows recorded them (with their Seq), deltas
	// with Seq 0.
	Events []Event `json:"events,omitempty"`
	// Lost says that items the follower had not taken are gone: it fell
	// behind the feed's buffer, or its watch ended.
	Lost bool `json:"lost,omitempty"`
}

// WithLiveFeed is a worker identity that advertises the live feed whose
// workflow id is id: identity (or, when empty, the SDK's default,
// PID@HOST@) followed by " live=ID".
func WithLiveFeed(identity, id string) string {
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s@", os.Getpid(), host)
	}
	return identity + liveField + id
}

// LiveFeedOf returns the workflow id of the live feed that a worker
// identity advertises, or "" for none; and the identity without it (nor
// the mark of WithInputRefs, nor the delta relay's URL of a worker of
// before the feed).
func LiveFeedOf(identity string) (id, rest string) {
	rest = withoutInputRefs(identity)
	id, rest = cutField(rest, liveField)
	_, rest = cutField(rest, relayField)
	return id, rest
}

// cutField returns the value of the last field marked mark in identity
// (up to the next space) and identity without the field.
func cutField(identity, mark string) (value, rest string) {
	i := strings.LastIndex(identity, mark)
	if i < 0 {
		return "", identity
	}
	value, after, _ := strings.Cut(identity[i+len(mark):], " ")
	if after != "" {
		after = " " + after
	}
	return value, identity[:i] + after
}
