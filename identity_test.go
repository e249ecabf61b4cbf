package troupe

import (
	"strings"
	"testing"
)

// TestWithStore: a worker's identity says its sandbox store after its
// first word, where readers of before it saw part of the worker's name;
// StoreOf reads it back and gives the identity without it, relay and
// all.
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
		relayed := WithInputRefs(WithRelay(got, "http://x"))
		if store, rest := StoreOf(relayed); store != tc.store || rest != WithInputRefs(WithRelay(tc.rest, "http://x")) {
			t.Errorf("StoreOf(%q) = %q, %q; want %q, %q", relayed, store, rest, tc.store, tc.rest)
		}
		if url, _ := RelayOf(relayed); url != "http://x" {
			t.Errorf("RelayOf(%q) = %q", relayed, url)
		}
	}
	if got := WithStore("", "s"); !strings.HasSuffix(got, "@ store=s") {
		t.Errorf("WithStore of the default identity = %q", got)
	}
}
