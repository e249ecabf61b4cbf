package blob_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/blob"
)

// TestPutWritten: a file store writes the blob as its bucket would (read
// back by another store, no temporary file left, mode as fileblob's), and
// the Written it gives says unchanged until the key is written again by
// anyone, in any way, or the file is changed in place; other stores and
// escaped keys give none.
func TestPutWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := s.Get(ctx, "t/run-1/000000.json"); err == nil {
		t.Fatal("found before written")
	}
	w, err := s.PutWritten(ctx, "t/run-1/000000.json", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		t.Skip("the test directory is not on a file system PutWritten holds files on")
	}
	defer w.Close()
	for _, st := range []*blob.Store{s, other} {
		if got, err := st.Get(ctx, "t/run-1/000000.json"); err != nil || string(got) != "one" {
			t.Fatalf("Get = %q, %v", got, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "t", "run-1"))
	if len(entries) != 1 {
		t.Errorf("files beside the blob: %v", entries)
	}
	if !w.Unchanged() {
		t.Error("Unchanged is false right after the write")
	}

	for _, tc := range []struct {
		name    string
		rewrite func(t *testing.T)
	}{
		{"this store's Put", func(t *testing.T) {
			if err := s.Put(ctx, "t/run-1/000000.json", []byte("one")); err != nil {
				t.Fatal(err)
			}
		}},
		{"another store's Put", func(t *testing.T) {
			if err := other.Put(ctx, "t/run-1/000000.json", []byte("two")); err != nil {
				t.Fatal(err)
			}
		}},
		{"another store's PutWritten", func(t *testing.T) {
			w, err := other.PutWritten(ctx, "t/run-1/000000.json", []byte("one"))
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}},
		{"a change in place", func(t *testing.T) {
			f, err := os.OpenFile(filepath.Join(dir, "t", "run-1", "000000.json"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("!")
			f.Close()
		}},
		{"a delete", func(t *testing.T) {
			if err := other.Delete(ctx, "t/run-1/000000.json"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := s.PutWritten(ctx, "t/run-1/000000.json", []byte("one"))
			if err != nil || w == nil {
				t.Fatal(w, err)
			}
			defer w.Close()
			if got, _ := s.Get(ctx, "t/run-1/000000.json"); string(got) != "one" {
				t.Fatalf("Get = %q: a cached read outlived the write", got)
			}
			tc.rewrite(t)
			if w.Unchanged() {
				t.Error("Unchanged after the blob changed")
			}
		})
	}

	// Keys a file store escapes, and other stores: no Written, a plain Put.
	if w, err := s.PutWritten(ctx, "t/run 1/000000.json", []byte("x")); err != nil || w != nil {
		t.Errorf("escaped key: %v, %v", w, err)
	}
	if got, err := other.Get(ctx, "t/run 1/000000.json"); err != nil || string(got) != "x" {
		t.Errorf("escaped key: Get = %q, %v", got, err)
	}
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if w, err := mem.PutWritten(ctx, "t/000000.json", []byte("x")); err != nil || w != nil {
		t.Errorf("mem store: %v, %v", w, err)
	}
	if got, err := mem.Get(ctx, "t/000000.json"); err != nil || string(got) != "x" {
		t.Errorf("mem store: Get = %q, %v", got, err)
	}
	// A write whose context ended leaves the blob as it was.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if w, err := s.PutWritten(cctx, "t/run-2/000000.json", []byte("late")); err == nil || w != nil {
		t.Errorf("cancelled write: %v, %v", w, err)
	}
	entries, _ = os.ReadDir(filepath.Join(dir, "t", "run-2"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".attrs") {
			t.Errorf("a cancelled write left %s", e.Name())
		}
	}
}
