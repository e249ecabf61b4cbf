package skills

import (
	"errors"
	"testing"
)

// The cache drops what was used least recently once past its size.
func TestLearntCacheLRU(t *testing.T) {
	c := NewLearntCache(2*(1+cachedOverhead) + 10) // room for two one-byte marks
	for _, step := range []struct {
		key  string
		want bool // new to the cache
	}{
		{"a", true}, {"b", true}, {"a", false}, // a used after b
		{"c", true},               // b dropped
		{"a", false}, {"b", true}, // c dropped
		{"a", false},
	} {
		if got := c.mark(step.key); got != step.want {
			t.Fatalf("mark(%q) = %v, want %v", step.key, got, step.want)
		}
	}
	// An entry is found until it is dropped; a mark is no entry.
	c = NewLearntCache(0)
	c.put("md", &learntEntry{name: "x", err: errors.New("bad")})
	if e, ok := c.entry("md"); !ok || e.name != "x" {
		t.Errorf("entry = %+v, %v", e, ok)
	}
	c.mark("seen")
	if _, ok := c.entry("seen"); ok {
		t.Error("a mark is taken for an entry")
	}
	if !c.Once("seen") || c.Once("seen") {
		t.Error("Once does not keep its keys apart from the capability's, or forgets them")
	}
}
