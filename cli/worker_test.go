package cli

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/codec"
)

// A worker's identity carries its model and its blob store, read back
// whole: a model's name has spaces, the live feed's field comes after (or
// the delta relay's, on a worker of before the feed), and a worker of
// before the store was in its identity has none.
func TestSetupOf(t *testing.T) {
	store := storeName("/srv/troupe/blobs")
	tests := []struct {
		identity          string
		who, model, store string
		ok                bool
	}{
		{workerIdentity("the responses API at https://api.openai.com/v1", store, false), "", "the responses API at https://api.openai.com/v1", store, true},
		{troupe.WithLiveFeed(workerIdentity("the offline scenarios", store, true), "troupe-live/h/1"), "", "the offline scenarios", store, true},
		{"7@h traces=on troupe model=m blob=" + store + " deltas=http://troupe:t@127.0.0.1:1/deltas", "7@h", "m", store, true},
		{"7@h troupe model=the offline scenarios", "7@h", "the offline scenarios", "", true},
		// A worker that takes big messages by reference says so last.
		{troupe.WithInputRefs(workerIdentity("the offline scenarios", store, false)), "", "the offline scenarios", store, true},
		{troupe.WithInputRefs(troupe.WithLiveFeed(workerIdentity("m", store, true), "troupe-live/h/1")), "", "m", store, true},
		{troupe.WithInputRefs(workerIdentity("m", store, true) + " deltas=http://troupe:t@127.0.0.1:1/deltas"), "", "m", store, true},
		// A worker states its payload keys' fingerprint after who it is.
		{codec.WithFingerprint(troupe.WithStore(workerIdentity("m", store, true), "s1"), codec.Fingerprint{}), "", "m", store, true},
		{"7@h keys=*k1:0a0b0c0d store=s1 traces=on troupe model=m blob=" + store, "7@h", "m", store, true},
		{troupe.WithInputRefs(troupe.WithLiveFeed(codec.WithFingerprint(troupe.WithStore(workerIdentity("m", store, true), "s1"), codec.Fingerprint{}), "troupe-live/h/1")), "", "m", store, true},
		{"7@h", "", "", "", false},
	}
	for _, tt := range tests {
		who, model, got, ok := setupOf(tt.identity)
		if ok != tt.ok || model != tt.model || got != tt.store || tt.who != "" && who != tt.who {
			t.Errorf("setupOf(%q) = %q, %q, %q, %v; want %q, %q, %v", tt.identity, who, model, got, ok, tt.model, tt.store, tt.ok)
		}
	}
}

// A worker's identity says whether it exports traces, after who it is,
// and tracesOf reads it back whole, with the rest of the identity as it
// was; a worker of before the field, or not troupe's, says nothing.
func TestTracesOf(t *testing.T) {
	store := storeName("/srv/troupe/blobs")
	relayed := func(id string) string { return troupe.WithLiveFeed(id, "troupe-live/h/1") }
	tests := []struct {
		name      string
		identity  string
		on, known bool
		rest      string
	}{
		{"exports", "7@h traces=on troupe model=m blob=b", true, true, "7@h troupe model=m blob=b"},
		{"exports none", "7@h traces=off troupe model=m blob=b deltas=http://x/deltas", false, true, "7@h troupe model=m blob=b deltas=http://x/deltas"},
		{"field last", "7@h traces=off", false, true, "7@h"},
		{"a worker of before the field", "7@h troupe model=m blob=b", false, false, "7@h troupe model=m blob=b"},
		{"the SDK's default", "7@h@ deltas=http://x/deltas", false, false, "7@h@ deltas=http://x/deltas"},
		{"a value it does not know", "7@h traces=maybe troupe model=m", false, false, "7@h troupe model=m"},
		{"workerIdentity, on", relayed(workerIdentity("the offline scenarios", store, true)), true, true, ""},
		{"workerIdentity, off", relayed(workerIdentity("the offline scenarios", store, false)), false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on, known, rest := tracesOf(tt.identity)
			if on != tt.on || known != tt.known || tt.rest != "" && rest != tt.rest {
				t.Errorf("tracesOf(%q) = %v, %v, %q; want %v, %v, %q", tt.identity, on, known, rest, tt.on, tt.known, tt.rest)
			}
			if strings.Contains(rest, tracesField) {
				t.Errorf("tracesOf(%q) leaves %q in the rest: %q", tt.identity, tracesField, rest)
			}
			if who, _, _, _ := setupOf(tt.identity); strings.Contains(who, " ") {
				t.Errorf("setupOf(%q) reads who the worker is as %q", tt.identity, who)
			}
		})
	}
}

// A store's name shows no credentials or parameters, tells apart stores
// that differ only there, and names a directory and its file:// URL alike.
func TestStoreName(t *testing.T) {
	a := storeName("s3://bucket?endpoint=http://10.0.0.1:7070&region=x")
	b := storeName("s3://bucket?endpoint=http://10.0.0.2:7070&region=x")
	if a == b || !strings.HasPrefix(a, "s3://bucket#") || strings.Contains(a, "10.0.0.1") {
		t.Errorf("stores differing in their endpoint: %q and %q", a, b)
	}
	if s := storeName("s3://key:secret@bucket"); strings.Contains(s, "secret") {
		t.Errorf("storeName shows credentials: %q", s)
	}
	if d, u := storeName("/srv/troupe/blobs"), storeName("file:///srv/troupe/blobs"); d != u {
		t.Errorf("a directory and its file:// URL: %q and %q", d, u)
	}
}
