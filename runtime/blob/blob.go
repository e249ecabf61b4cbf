// Package blob holds Troupe's blob store: transcripts, large tool outputs
// and (later) snapshots live here and travel through Temporal only by key,
// so no workflow payload grows with them.
//
// The store is a gocloud.dev/blob bucket chosen by URL: file:// (the
// default, one host), mem:// (tests), and, for workers on several hosts:
//
//   - s3://BUCKET: AWS S3 or any S3-compatible server (add endpoint=,
//     region= and use_path_style=true for one that is not AWS);
//     credentials come from the usual AWS_* variables.
//   - gs://BUCKET: Google Cloud Storage, with Application Default
//     Credentials. endpoint=http://HOST:PORT points it at another server
//     (an emulator such as fake-gcs-server, a private endpoint), and
//     anonymous=true sends no credentials; with endpoint, these two are the
//     only parameters taken (besides prefix).
//   - azblob://CONTAINER: Azure Blob Storage, with the AZURE_STORAGE_*
//     variables or Azure's default credentials. For the Azurite emulator
//     add protocol=http&domain=HOST:PORT&localemu=true: when the
//     environment gives no AZURE_STORAGE_* credentials, Azurite's
//     well-known development account ([AzuriteAccount]) and key are used,
//     so the URL alone reaches it.
//
// Every scheme takes gocloud's prefix= parameter, which puts the store's
// keys under a prefix. Each passes the same conformance tests, against a
// real server of its kind (versitygw, fake-gcs-server, Azurite),
// create-only writes included.
//
// Keys are grouped by run: everything a run writes lives under
// transcripts/RUN/, outputs/RUN/, snapshots/RUN/ and events/RUN/, where
// RUN is the run's workflow id, so a run's data can be found and deleted
// (see [Store.DeletePrefix] and the sweeper in package workflows).
//
// Writes are whole (a reader sees the old blob or the new one) and the
// last one stands; [Store.Create] is the one conditional write, which
// succeeds for exactly one of the writers that race to create a key.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	_ "gocloud.dev/blob/fileblob"  // file:// URLs
	_ "gocloud.dev/blob/gcsblob"   // gs:// URLs
	_ "gocloud.dev/blob/memblob"   // mem:// URLs
	_ "gocloud.dev/blob/s3blob"    // s3:// URLs
	"gocloud.dev/gcerrors"
)

// ErrNotFound reports a key the store does not hold.
var ErrNotFound = errors.New("blob: not found")

// Store is a blob store with a small in-process read cache. Only reads
// fill the cache: a key may be written more than once (an activity retried
// on another worker writes its own result), but a workflow reads a key
// only after it accepted the attempt that wrote it, and that content is
// final.
type Store struct {
	bucket *blob.Bucket
	// closeClient releases what the bucket's Close does not (a gs://
	// store's client on an endpoint of its own, see openBucket), or is nil.
	closeClient func() error
	url         string
	// dir is the directory of a file:// store, which creates blobs itself
	// (see Create), and prefix the prefix its URL puts its keys under; ""
	// for the others.
	dir, prefix string
	// plain is a file:// store whose URL had no query, opened with no .attrs
	// files and no temporary directory (see Open): one whose blobs are
	// files and nothing else, written beside their path. local is such
	// a store on a local file system (see PutWritten).
	plain, local bool
	// gcs is a gs:// store (see whole).
	gcs bool

	mu       sync.Mutex
	cache    map[string][]byte
	order    []string
	size     int
	maxCache int
}

// Open opens the store at url. A bare directory path means file://. For
// file:// the directory is created if missing.
func Open(ctx context.Context, url string) (*Store, error) {
	if !strings.Contains(url, "://") {
		abs, err := filepath.Abs(url)
		if err != nil {
			return nil, fmt.Errorf("blob: %w", err)
		}
		url = "file://" + abs
	}
	fileDir, filePrefix := "", ""
	plain, local := false, false
	if dir, ok := strings.CutPrefix(url, "file://"); ok {
		dir, query, _ := strings.Cut(dir, "?")
		fileDir = filepath.Clean(dir)
		// gocloud's prefix parameter, which it honours for every scheme,
		// puts the keys under a prefix: Create does too.
		if q, err := neturl.ParseQuery(query); err == nil {
			filePrefix = q.Get("prefix")
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("blob: %w", err)
		}
		if !strings.Contains(url, "?") {
			// No .attrs side files: nothing reads blob attributes, and
			// writing them (with an MD5) costs more than the blob.
			url += "?no_tmp_dir=true&metadata=skip"
			plain, local = true, localFS(dir)
		}
	}
	b, closeClient, err := openBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", url, err)
	}
	return &Store{bucket: b, closeClient: closeClient, url: url, dir: fileDir, prefix: filePrefix, plain: plain, local: local, gcs: strings.HasPrefix(url, "gs://"), cache: map[string][]byte{}, maxCache: 64 << 20}, nil
}

// URL is the URL the store was opened with.
func (s *Store) URL() string { return s.url }

// Put writes data under key.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.bucket.WriteAll(ctx, key, data, s.whole(&blob.WriterOptions{})); err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	s.forget(key)
	return nil
}

// whole returns opts for a write of data held whole in memory. GCS's
// client buffers every write in a chunk of 16 MiB by default, allocated
// for a blob of a few bytes all the same (many writers at once, as in
// memory's compare-and-swap, each take one): a whole write goes in one
// request, with no chunk.
func (s *Store) whole(opts *blob.WriterOptions) *blob.WriterOptions {
	if s.gcs {
		opts.BufferSize = -1 // gcsblob: no chunking, one request
	}
	return opts
}

// forget drops key's cached content after a rewrite.
func (s *Store) forget(key string) {
	s.mu.Lock()
	if old, ok := s.cache[key]; ok {
		s.size -= len(old)
		delete(s.cache, key)
	}
	s.mu.Unlock()
}

// PutFrom writes what r holds under key, streaming it: the store holds
// none of it in memory, whatever its size. A failed PutFrom leaves key as
// it was.
func (s *Store) PutFrom(ctx context.Context, key string, r io.Reader) error {
	// Closing a writer whose context is cancelled discards what it wrote,
	// so a partial blob is never committed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, nil)
	if err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		w.Close()
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	s.forget(key)
	return nil
}

// Open returns a reader of the data under key, streaming it, for blobs
// too large to hold in memory (snapshots). A missing key gives an error
// wrapping ErrNotFound. The caller closes the reader.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("blob: get %s: %w", key, err)
	}
	return r, nil
}

// Get reads the data under key. A missing key gives an error wrapping
// ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.cache[key]
	s.mu.Unlock()
	if ok {
		return data, nil
	}
	data, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("blob: get %s: %w", key, err)
	}
	s.remember(key, data)
	return data, nil
}

func (s *Store) remember(key string, data []byte) {
	if len(data) > s.maxCache/16 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.cache[key]; ok {
		s.size -= len(old)
	} else {
		s.order = append(s.order, key)
	}
	s.cache[key] = data
	s.size += len(data)
	// Evict oldest first. A key forgotten by Put and read again can stand
	// twice in order; evicting it early is harmless.
	for s.size > s.maxCache && len(s.order) > 0 {
		k := s.order[0]
		s.order = s.order[1:]
		if d, ok := s.cache[k]; ok {
			s.size -= len(d)
			delete(s.cache, k)
		}
	}
}

// Dirs returns the names one level below prefix (which ends in "/"): for
// "transcripts/", the runs that have transcripts.
func (s *Store) Dirs(ctx context.Context, prefix string) ([]string, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []string
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("blob: list %s: %w", prefix, err)
		}
		if obj.IsDir {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/"))
		}
	}
}

// List returns the keys of the blobs under prefix, in key order, at most
// max of them (0: no bound); more reports that there were more.
func (s *Store) List(ctx context.Context, prefix string, max int) (keys []string, more bool, err error) {
	objs, more, err := s.ListObjects(ctx, prefix, max)
	if err != nil {
		return nil, false, err
	}
	keys = make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys, more, nil
}

// Object is a blob as a listing gives it, unread.
type Object struct {
	Key string
	// Size is its length in bytes, and ModTime when it was written, by
	// the store's clock (to the second on S3).
	Size    int64
	ModTime time.Time
	// MD5 is the MD5 of its content when the store's listing gives one
	// (mem://, GCS, Azure, S3 for a blob written in one request), nil
	// otherwise (file://, an S3 blob uploaded in parts).
	MD5 []byte
}

// ListObjects is List with what the listing says of each blob: a caller
// can tell which blobs changed since an earlier listing without reading
// them.
func (s *Store) ListObjects(ctx context.Context, prefix string, max int) (objs []Object, more bool, err error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return objs, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("blob: list %s: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if max > 0 && len(objs) == max {
			return objs, true, nil
		}
		objs = append(objs, Object{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5})
	}
}

// Delete deletes the blob under key; a key the store does not hold is
// not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	s.forget(key)
	return nil
}

// Newest returns when the newest blob under prefix was written, and
// whether there is any.
func (s *Store) Newest(ctx context.Context, prefix string) (time.Time, bool, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	var newest time.Time
	found := false
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return newest, found, nil
		}
		if err != nil {
			return time.Time{}, false, fmt.Errorf("blob: list %s: %w", prefix, err)
		}
		if !obj.IsDir {
			found = true
			if obj.ModTime.After(newest) {
				newest = obj.ModTime
			}
		}
	}
}

// DeletePrefix deletes every blob under prefix and returns how many. A
// blob that another deleter took first is not an error.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if prefix == "" {
		return 0, errors.New("blob: delete with an empty prefix")
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	n := 0
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("blob: list %s: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return n, fmt.Errorf("blob: delete %s: %w", obj.Key, err)
		}
		s.forget(obj.Key)
		n++
	}
}

// CheckTimeout bounds Check.
const CheckTimeout = 15 * time.Second

// Check writes, reads back and deletes a small blob, so that a store that
// cannot be used (a wrong URL, no credentials, a bucket that does not
// exist) is found when a worker starts rather than at a run's first turn.
// It also creates a blob twice (Create), so that a store that does not
// honour create-only writes (an S3-compatible server or an emulator that
// ignores If-None-Match or ifGenerationMatch), on which memory's
// compare-and-swap would let every writer win, is found too. It gives up after CheckTimeout.
func (s *Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	key := fmt.Sprintf("troupe-check/%d-%d", os.Getpid(), time.Now().UnixNano())
	want := []byte("troupe")
	err := s.bucket.WriteAll(ctx, key, want, nil)
	if err == nil {
		var got []byte
		if got, err = s.bucket.ReadAll(ctx, key); err == nil && string(got) != string(want) {
			err = fmt.Errorf("read back %q, wrote %q", got, want)
		}
		if derr := s.bucket.Delete(ctx, key); err == nil {
			err = derr
		}
	}
	if err == nil {
		err = s.checkCreate(ctx, key+"-create")
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("blob: store %s did not answer within %s: %w", s.url, CheckTimeout, err)
		}
		return fmt.Errorf("blob: store %s cannot be used: %w", s.url, err)
	}
	return nil
}

// checkCreate creates key twice: the second must find it taken.
func (s *Store) checkCreate(ctx context.Context, key string) error {
	err := s.Create(ctx, key, []byte("first"))
	if err == nil {
		err = s.Create(ctx, key, []byte("second"))
		switch {
		case err == nil:
			err = errors.New("a create-only write (If-None-Match: * on S3 and Azure, ifGenerationMatch=0 on GCS) replaced the blob it found: the store does not honour conditional writes, which memory needs")
		case errors.Is(err, ErrExists):
			err = nil
		}
		if got, rerr := s.bucket.ReadAll(ctx, key); err == nil && (rerr != nil || string(got) != "first") {
			err = fmt.Errorf("after a create that lost, the blob reads %q (%v), want the first one's", got, rerr)
		}
		if derr := s.bucket.Delete(ctx, key); err == nil {
			err = derr
		}
	}
	return err
}

// Close releases the bucket.
func (s *Store) Close() error {
	err := s.bucket.Close()
	if s.closeClient != nil {
		err = errors.Join(err, s.closeClient())
	}
	return err
}
