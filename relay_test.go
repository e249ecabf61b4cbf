package troupe

import (
	"strings"
	"testing"
)

func TestRelayInIdentity(t *testing.T) {
	const u = "http://troupe:abc123@127.0.0.1:41234/deltas"
	tests := []struct {
		identity, url, rest string
	}{
		{"4242@box troupe model=the offline scenarios" + relayField + u, u, "4242@box troupe model=the offline scenarios"},
		{"4242@box troupe model=the responses API at https://api.openai.com/v1", "", "4242@box troupe model=the responses API at https://api.openai.com/v1"},
		{WithRelay("7@h troupe model=m", u), u, "7@h troupe model=m"},
		// The mark of a worker that takes big messages by reference is
		// neither the relay's nor the rest's.
		{WithInputRefs(WithRelay("7@h troupe model=m blob=s", u)), u, "7@h troupe model=m blob=s"},
		{WithInputRefs("7@h troupe model=m blob=s"), "", "7@h troupe model=m blob=s"},
	}
	for _, tt := range tests {
		gotURL, gotRest := RelayOf(tt.identity)
		if gotURL != tt.url || gotRest != tt.rest {
			t.Errorf("RelayOf(%q) = %q, %q; want %q, %q", tt.identity, gotURL, gotRest, tt.url, tt.rest)
		}
	}
	if id := WithRelay("", u); !strings.HasSuffix(id, "@"+relayField+u) || !strings.Contains(id, "@") {
		t.Errorf("withRelay of the default identity = %q; want PID@HOST@ and the relay", id)
	}
}

// A worker says it takes messages by reference in its identity, once,
// wherever the relay is; an identity without the mark (an older worker's,
// or the SDK's default) does not.
func TestInputRefsInIdentity(t *testing.T) {
	const u = "http://troupe:abc123@127.0.0.1:41234/deltas"
	tests := []struct {
		identity string
		takes    bool
	}{
		{WithInputRefs(WithRelay("7@h troupe model=m blob=s", u)), true},
		{WithInputRefs("7@h troupe model=m blob=s"), true},
		{WithInputRefs(WithInputRefs("7@h")), true},
		{WithRelay("7@h troupe model=m blob=s", u), false},
		{"7@h@", false},
		{"7@h troupe model=the inputs=reference model blob=s", false},
	}
	for _, tt := range tests {
		if got := TakesInputRefs(tt.identity); got != tt.takes {
			t.Errorf("TakesInputRefs(%q) = %v, want %v", tt.identity, got, tt.takes)
		}
	}
	if id := WithInputRefs(WithInputRefs("7@h")); strings.Count(id, inputRefsField) != 1 {
		t.Errorf("marked twice: %q", id)
	}
	if id := WithInputRefs(""); !strings.HasSuffix(id, "@"+inputRefsField) {
		t.Errorf("WithInputRefs of the default identity = %q; want PID@HOST@ and the mark", id)
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
