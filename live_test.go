package troupe

import (
	"strings"
	"testing"
)

func TestLiveFeedInIdentity(t *testing.T) {
	const id = "troupe-live/box/0f3a"
	tests := []struct {
		identity, id, rest string
	}{
		{"4242@box troupe model=the offline scenarios" + liveField + id, id, "4242@box troupe model=the offline scenarios"},
		{"4242@box troupe model=the responses API at https://api.openai.com/v1", "", "4242@box troupe model=the responses API at https://api.openai.com/v1"},
		{WithLiveFeed("7@h troupe model=m", id), id, "7@h troupe model=m"},
		// The mark of a worker that takes big messages by reference is
		// neither the feed's nor the rest's.
		{WithInputRefs(WithLiveFeed("7@h troupe model=m blob=s", id)), id, "7@h troupe model=m blob=s"},
		{WithInputRefs("7@h troupe model=m blob=s"), "", "7@h troupe model=m blob=s"},
		// A worker of before the feed advertised a relay: not a feed, and
		// not part of who it is.
		{WithInputRefs("7@h troupe model=m blob=s deltas=http://troupe:t@127.0.0.1:1/deltas"), "", "7@h troupe model=m blob=s"},
	}
	for _, tt := range tests {
		gotID, gotRest := LiveFeedOf(tt.identity)
		if gotID != tt.id || gotRest != tt.rest {
			t.Errorf("LiveFeedOf(%q) = %q, %q; want %q, %q", tt.identity, gotID, gotRest, tt.id, tt.rest)
		}
	}
	if got := WithLiveFeed("", id); !strings.HasSuffix(got, "@"+liveField+id) || !strings.Contains(got, "@") {
		t.Errorf("WithLiveFeed of the default identity = %q; want PID@HOST@ and the feed", got)
	}
}

// A worker says it takes messages by reference in its identity, once,
// wherever the feed is; an identity without the mark (an older worker's,
// or the SDK's default) does not.
func TestInputRefsInIdentity(t *testing.T) {
	const id = "troupe-live/h/1"
	tests := []struct {
		identity string
		takes    bool
	}{
		{WithInputRefs(WithLiveFeed("7@h troupe model=m blob=s", id)), true},
		{WithInputRefs("7@h troupe model=m blob=s"), true},
		{WithInputRefs(WithInputRefs("7@h")), true},
		{WithLiveFeed("7@h troupe model=m blob=s", id), false},
		{"7@h@", false},
		{"7@h troupe model=the inputs=reference model blob=s", false},
	}
	for _, tt := range tests {
		if got := TakesInputRefs(tt.identity); got != tt.takes {
			t.Errorf("TakesInputRefs(%q) = %v, want %v", tt.identity, got, tt.takes)
		}
	}
	if got := WithInputRefs(WithInputRefs("7@h")); strings.Count(got, inputRefsField) != 1 {
		t.Errorf("marked twice: %q", got)
	}
	if got := WithInputRefs(""); !strings.HasSuffix(got, "@"+inputRefsField) {
		t.Errorf("WithInputRefs of the default identity = %q; want PID@HOST@ and the mark", got)
	}
}

// A message is refused past MessageLimit, typed, and only there.
func TestCheckMessage(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, ""}, {MessageInline + 1, ""}, {MessageLimit, ""}, {MessageLimit + 1, ErrPayloadTooLarge}} {
		if got := ErrorType(CheckMessage("the message", tt.n)); got != tt.want {
			t.Errorf("CheckMessage(%d) is a %q error, want %q", tt.n, got, tt.want)
		}
	}
}
