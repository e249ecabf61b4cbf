package blob_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/troupe-dev/troupe/internal/s3test"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// TestStore: a key reads back what was last put there, on every store
// kind; a second client of a shared store reads it too.
func TestStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := append([]backend{{name: "file", url: dir, shared: true}, {name: "file-url", url: "file://" + dir + "/sub", shared: true}}, backends(t)[1:]...)
	for _, b := range stores {
		t.Run(b.name, func(t *testing.T) {
			s, err := blob.Open(ctx, b.url)
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
			if b.shared {
				other, err := blob.Open(ctx, b.url)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				if got, err := other.Get(ctx, "a/b"); err != nil || string(got) != "two" {
					t.Errorf("a second client reads %q, %v", got, err)
				}
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
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s, err := blob.Open(ctx, b.url)
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

// TestRunsData: a run's data is listed by prefix, dated, and deleted as
// one, on every store kind, where a second client of a cloud store
// (another host) sees what the first wrote.
func TestRunsData(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		url := b.url
		t.Run(b.name, func(t *testing.T) {
			s, err := blob.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before := time.Now().Add(-time.Minute)
			for _, k := range []string{"transcripts/run-a/0-x/000001.json", "transcripts/run-a/0-x/000002.json", "transcripts/run-b/0-y/000001.json", "outputs/run-a/0-x/1-c"} {
				if err := s.Put(ctx, k, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.PutFrom(ctx, "snapshots/run-a/abc.tar.zst", strings.NewReader("snapshot")); err != nil {
				t.Fatal(err)
			}
			dirs, err := s.Dirs(ctx, "transcripts/")
			if err != nil || strings.Join(dirs, ",") != "run-a,run-b" {
				t.Errorf("Dirs = %v, %v; want run-a, run-b", dirs, err)
			}
			newest, ok, err := s.Newest(ctx, "transcripts/run-a/")
			if err != nil || !ok || newest.Before(before) {
				t.Errorf("Newest = %v, %v, %v", newest, ok, err)
			}
			if _, ok, _ := s.Newest(ctx, "transcripts/run-c/"); ok {
				t.Error("Newest found blobs under an empty prefix")
			}
			if b.shared && b.name != "file" {
				other, err := blob.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				got, err := other.Get(ctx, "outputs/run-a/0-x/1-c")
				other.Close()
				if err != nil || string(got) != "outputs/run-a/0-x/1-c" {
					t.Errorf("another client reads %q, %v", got, err)
				}
			}
			// Read (cached), then deleted: the cache forgets it too.
			if _, err := s.Get(ctx, "transcripts/run-a/0-x/000001.json"); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"transcripts/run-a/", "outputs/run-a/", "snapshots/run-a/"} {
				if _, err := s.DeletePrefix(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Get(ctx, "transcripts/run-a/0-x/000001.json"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("a deleted blob reads back: %v", err)
			}
			if got, err := s.Get(ctx, "transcripts/run-b/0-y/000001.json"); err != nil || len(got) == 0 {
				t.Errorf("another run's blob went too: %v", err)
			}
			if _, err := s.DeletePrefix(ctx, ""); err == nil {
				t.Error("DeletePrefix with an empty prefix deleted the store")
			}
		})
	}
}

// TestCheck: a usable store of every kind passes (its create-only writes
// among what it checks) and keeps nothing of the check; one whose
// directory became a file fails, naming the store; so does one that does
// not honour create-only writes.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		s, err := blob.Open(ctx, b.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); err != nil {
			t.Errorf("%s: %v", b.name, err)
		}
		if keys, _, err := s.List(ctx, "", 0); err != nil || len(keys) != 0 {
			t.Errorf("%s: after a check the store holds %v (%v)", b.name, keys, err)
		}
		s.Close()
	}
	// An S3-compatible server that ignores If-None-Match (versitygw
	// without metadata) fails the check: memory's compare-and-swap would
	// let every writer win there.
	lax := s3test.StartWithoutMetadata(t, "lax")
	lax.SetEnv(t)
	ls, err := blob.Open(ctx, lax.URL("lax"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Check(ctx); err == nil || !strings.Contains(err.Error(), "does not honour conditional writes") {
		t.Errorf("a server that ignores If-None-Match: %v", err)
	}
	ls.Close()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "cannot be used") || !strings.Contains(err.Error(), "store") {
		t.Errorf("a store whose directory is a file: %v", err)
	}
}

// TestCreate: Create writes a key once. Of writers racing to create one
// key, from one store or two over one directory (two workers), exactly
// one wins, and the key holds its data; the others get ErrExists, on
// every store kind. On S3 this is versitygw honouring If-None-Match: * on
// PutObject (it does when it keeps metadata: see package s3test), on GCS
// fake-gcs-server honouring ifGenerationMatch=0, on Azure Azurite
// honouring If-None-Match: *. A file store leaves no
// temporary file behind. (The races are a stress check: with fileblob's
// own IfNotExist, a stat then a rename, a key got two winners in about 1
// run of 15.)
func TestCreate(t *testing.T) {
	ctx := context.Background()
	stores := backends(t)
	dir := stores[0].url
	for _, b := range stores {
		t.Run(b.name, func(t *testing.T) {
			s, err := blob.Open(ctx, b.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			other := s
			if b.shared {
				if other, err = blob.Open(ctx, b.url); err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			if err := s.Create(ctx, "c/gen/1.json", []byte("first")); err != nil {
				t.Fatal(err)
			}
			if err := other.Create(ctx, "c/gen/1.json", []byte("second")); !errors.Is(err, blob.ErrExists) {
				t.Errorf("a second create = %v, want ErrExists", err)
			}
			if got, err := s.Get(ctx, "c/gen/1.json"); err != nil || string(got) != "first" {
				t.Errorf("after a create that lost: %q, %v; want the first", got, err)
			}
			// A create after a Put of the key loses too.
			if err := s.Put(ctx, "c/put", []byte("put")); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, "c/put", []byte("create")); !errors.Is(err, blob.ErrExists) {
				t.Errorf("create over a put = %v, want ErrExists", err)
			}
			// Races: 8 writers on each of 20 keys, half through each store.
			const writers, keys = 8, 20
			var wg sync.WaitGroup
			wins := make([][]int, keys)
			var mu sync.Mutex
			for k := range keys {
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						st := s
						if w%2 == 1 {
							st = other
						}
						err := st.Create(ctx, fmt.Sprintf("c/race/%d", k), []byte(strconv.Itoa(w)))
						switch {
						case err == nil:
							mu.Lock()
							wins[k] = append(wins[k], w)
							mu.Unlock()
						case !errors.Is(err, blob.ErrExists):
							t.Error(err)
						}
					}()
				}
			}
			wg.Wait()
			for k, ws := range wins {
				if len(ws) != 1 {
					t.Errorf("key %d: writers %v won, want exactly one", k, ws)
					continue
				}
				if got, err := s.Get(ctx, fmt.Sprintf("c/race/%d", k)); err != nil || string(got) != strconv.Itoa(ws[0]) {
					t.Errorf("key %d holds %q (%v), want the winner's %d", k, got, err, ws[0])
				}
			}
			listed, _, err := s.List(ctx, "c/", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range listed {
				if strings.HasSuffix(k, ".tmp") {
					t.Errorf("temporary file left: %s", k)
				}
			}
		})
	}
	s, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A key fileblob would store escaped is refused, not created under
	// another path.
	if err := s.Create(ctx, "c/../escape", nil); err == nil || errors.Is(err, blob.ErrExists) {
		t.Errorf("a file store created a key with a .. element: %v", err)
	}
}

// List lists the keys under a prefix in order, bounded; Delete deletes
// one key and forgets its cached content, and a missing key is no error.
func TestListDelete(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s, err := blob.Open(ctx, b.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, k := range []string{"m/x/2", "m/x/1", "m/x/sub/3", "m/y/1"} {
				if err := s.Put(ctx, k, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			keys, more, err := s.List(ctx, "m/x/", 0)
			if err != nil || more || strings.Join(keys, " ") != "m/x/1 m/x/2 m/x/sub/3" {
				t.Fatalf("List = %v %v %v", keys, more, err)
			}
			if keys, more, _ := s.List(ctx, "m/x/", 2); len(keys) != 2 || !more {
				t.Errorf("bounded List = %v %v", keys, more)
			}
			if _, err := s.Get(ctx, "m/x/1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "m/x/1"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "m/x/1"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("deleted key read back: %v", err)
			}
			if err := s.Delete(ctx, "m/x/1"); err != nil {
				t.Errorf("deleting a missing key: %v", err)
			}
		})
	}
}

// A file store opened with gocloud's prefix parameter keeps its blobs
// under the prefix, those Create makes too: the store passes its Check,
// and a created blob reads back.
func TestCreateUnderFilePrefix(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := blob.Open(ctx, "file://"+dir+"?prefix=team-a/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check refuses a prefixed file store: %v", err)
	}
	if err := s.Create(ctx, "k/created", []byte("y")); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got, err := s.Get(ctx, "k/created"); err != nil || string(got) != "y" {
		t.Errorf("a created blob reads %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "team-a", "k", "created")); err != nil {
		t.Errorf("the created blob is not under the prefix: %v", err)
	}
}

// TestListObjects: a listing says each blob's size and time, and its MD5
// where the store gives one (every kind but file), so that a rewrite
// shows without a read.
func TestListObjects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range backends(t) {
		t.Run(tc.name, func(t *testing.T) {
			s, err := blob.Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for k, v := range map[string]string{"o/a": "one", "o/b": "three", "p/c": "x"} {
				if err := s.Put(ctx, k, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			objs, more, err := s.ListObjects(ctx, "o/", 0)
			if err != nil || more || len(objs) != 2 || objs[0].Key != "o/a" || objs[1].Key != "o/b" {
				t.Fatalf("ListObjects = %+v %v %v", objs, more, err)
			}
			for i, want := range []string{"one", "three"} {
				o := objs[i]
				if o.Size != int64(len(want)) || o.ModTime.IsZero() {
					t.Errorf("%s: size %d, time %v; want %d and a time", o.Key, o.Size, o.ModTime, len(want))
				}
				if sum := md5.Sum([]byte(want)); tc.md5 != (len(o.MD5) > 0) || (tc.md5 && !bytes.Equal(o.MD5, sum[:])) {
					t.Errorf("%s: MD5 %x, want the content's: %v", o.Key, o.MD5, tc.md5)
				}
			}
			if err := s.Put(ctx, "o/a", []byte("other")); err != nil {
				t.Fatal(err)
			}
			again, _, err := s.ListObjects(ctx, "o/", 1)
			if err != nil || len(again) != 1 || again[0].Size != 5 || (tc.md5 && bytes.Equal(again[0].MD5, objs[0].MD5)) {
				t.Errorf("after a rewrite ListObjects = %+v, %v", again, err)
			}
		})
	}
}
