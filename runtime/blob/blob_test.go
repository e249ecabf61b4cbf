package blob_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/troupe-dev/troupe/runtime/blob"
)

func TestStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{dir, "file://" + dir + "/sub", "mem://"} {
		t.Run(url, func(t *testing.T) {
			s, err := blob.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Get(ctx, "a/missing"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("missing key: err = %v, want ErrNotFound", err)
			}
			if err := s.Put(ctx, "a/b", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, "a/b"); err != nil || string(got) != "one" {
				t.Fatalf("Get = %q, %v", got, err)
			}
			// A rewrite (an activity retried) is what later reads see.
			if err := s.Put(ctx, "a/b", []byte("two")); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx, "a/b"); string(got) != "two" {
				t.Errorf("after a rewrite Get = %q, want two", got)
			}
		})
	}
	// A file store is shared by every process that opens the directory,
	// and writes no attribute files beside the blobs.
	other, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Get(ctx, "a/b"); err != nil || string(got) != "two" {
		t.Errorf("a second store reads %q, %v", got, err)
	}
	attrs, _ := filepath.Glob(filepath.Join(dir, "a", "*.attrs"))
	if len(attrs) != 0 {
		t.Errorf("attribute files written: %v", attrs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil {
		t.Errorf("blob not stored as a file: %v", err)
	}
}

// TestStreams: PutFrom and Open stream a blob; a PutFrom whose reader
// fails leaves the key as it was; a rewrite is seen by Get.
func TestStreams(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{dir, "mem://"} {
		t.Run(url, func(t *testing.T) {
			s, err := blob.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Open(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open(missing) = %v, want ErrNotFound", err)
			}
			big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
			if err := s.PutFrom(ctx, "k", strings.NewReader(big)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, "k"); err != nil || string(got) != big {
				t.Fatalf("Get after PutFrom: %d bytes, %v", len(got), err)
			}
			broken := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("disk on fire")))
			if err := s.PutFrom(ctx, "k", broken); err == nil || !strings.Contains(err.Error(), "disk on fire") {
				t.Errorf("PutFrom of a failing reader = %v", err)
			}
			r, err := s.Open(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(got) != big {
				t.Errorf("after a failed PutFrom the key holds %d bytes (%v), want the earlier %d", len(got), err, len(big))
			}
			if err := s.PutFrom(ctx, "k", strings.NewReader("new")); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, "k"); err != nil || string(got) != "new" {
				t.Errorf("Get after a rewrite = %q, %v; want the new content, not the cached one", got, err)
			}
		})
	}
}
