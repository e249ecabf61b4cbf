// Package blob holds Troupe's blob store: transcripts, large tool outputs
// and (later) snapshots live here and travel through Temporal only by key,
// so no workflow payload grows with them.
//
// The store is a gocloud.dev/blob bucket chosen by URL. file:// and mem://
// are built in; other providers (s3://, gs://, azblob://) work once their
// gocloud driver is linked in with a blank import.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs
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
	url    string

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
	if dir, ok := strings.CutPrefix(url, "file://"); ok {
		dir, _, _ = strings.Cut(dir, "?")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("blob: %w", err)
		}
		if !strings.Contains(url, "?") {
			// No .attrs side files: nothing reads blob attributes, and
			// writing them (with an MD5) costs more than the blob.
			url += "?no_tmp_dir=true&metadata=skip"
		}
	}
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", url, err)
	}
	return &Store{bucket: b, url: url, cache: map[string][]byte{}, maxCache: 64 << 20}, nil
}

// URL is the URL the store was opened with.
func (s *Store) URL() string { return s.url }

// Put writes data under key.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.bucket.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	s.forget(key)
	return nil
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

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }
