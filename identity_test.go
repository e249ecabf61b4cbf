package troupe

import (
	"strings"
	"testing"
)

// TestWithStore: a worker's identity says its sandbox store after its
// first word, where readers of before it saw part of the worker's name;
// StoreOf reads it back and gives the identity without it, live feed
// and all.
func TestWithStore(t *testing.T) {
	for _, tc := range []struct{ identity, store, want, rest string }{
		{"12@h traces=on troupe model=m blob=b", "h-0011", "12@h store=h-0011 traces=on troupe model=m blob=b", "12@h traces=on troupe model=m blob=b"},
		{"12@h", "h-0011", "12@h store=h-0011", "12@h"},
		{"12@h store=old troupe model=m", "h-0011", "12@h store=h-0011 troupe model=m", "12@h troupe model=m"},
		{"12@h troupe model=m", "", "12@h troupe model=m", "12@h troupe model=m"},
	} {
		got := WithStore(tc.identity, tc.store)
		if got != tc.want {
			t.Errorf("WithStore(%q, %q) = %q, want %q", tc.identity, tc.store, got, tc.want)
		}
		fed := WithInputRefs(WithLiveFeed(got, "troupe-live/h/1"))
		if store, rest := StoreOf(fed); store != tc.store || rest != WithInputRefs(WithLiveFeed(tc.rest, "troupe-live/h/1")) {
			t.Errorf("StoreOf(%q) = %q, %q; want %q, %q", fed, store, rest, tc.store, tc.rest)
		}
		if id, _ := LiveFeedOf(fed); id != "troupe-live/h/1" {
			t.Errorf("LiveFeedOf(%q) = %q", fed, id)
		}
	}
	if got := WithStore("", "s"); !strings.HasSuffix(got, "@ store=s") {
		t.Errorf("WithStore of the default identity = %q", got)
	}
}
