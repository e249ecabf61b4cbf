package cli

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
)

// A worker's identity carries its model and its blob store, read back
// whole: a model's name has spaces, the relay's field comes after, and a
// worker of before the store was in its identity has none.
func TestSetupOf(t *testing.T) {
	store := storeName("/srv/troupe/blobs")
	tests := []struct {
		identity          string
		who, model, store string
		ok                bool
	}{
		{workerIdentity("the responses API at https://api.openai.com/v1", store), "", "the responses API at https://api.openai.com/v1", store, true},
		{troupe.WithRelay(workerIdentity("the offline scenarios", store), "http://troupe:t@127.0.0.1:1/deltas"), "", "the offline scenarios", store, true},
		{"7@h troupe model=the offline scenarios", "7@h", "the offline scenarios", "", true},
		// A worker that takes big messages by reference says so last.
		{troupe.WithInputRefs(workerIdentity("the offline scenarios", store)), "", "the offline scenarios", store, true},
		{troupe.WithInputRefs(troupe.WithRelay(workerIdentity("m", store), "http://troupe:t@127.0.0.1:1/deltas")), "", "m", store, true},
		{"7@h", "", "", "", false},
	}
	for _, tt := range tests {
		who, model, got, ok := setupOf(tt.identity)
		if ok != tt.ok || model != tt.model || got != tt.store || tt.who != "" && who != tt.who {
			t.Errorf("setupOf(%q) = %q, %q, %q, %v; want %q, %q, %v", tt.identity, who, model, got, ok, tt.model, tt.store, tt.ok)
		}
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
