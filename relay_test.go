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
