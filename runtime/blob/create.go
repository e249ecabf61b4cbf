package blob

// Create: the store's one conditional write, on which writers that share
// keys build their compare-and-swap (memory generations, in package
// workflows).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrExists reports a key that Create found taken.
var ErrExists = errors.New("blob: key exists")

// Create writes data under key only if the store holds nothing there, in
// one atomic step: of writers racing to create a key, in this process or
// any other, exactly one succeeds and the others get an error wrapping
// ErrExists, the key keeping the winner's data; no reader sees a partly
// written blob.
//
// mem://, s3:// (a PutObject with If-None-Match: *), gs:// and azblob://
// create with gocloud's IfNotExist. file:// does not: fileblob checks that
// the file is missing and then renames its temporary file over it, two
// steps another writer can come between. A file store writes a temporary
// file beside the blob and hard-links it to the blob's path, which fails
// if the path exists; it needs a file system with hard links, and takes
// keys whose every element is made of letters, digits, '.', '_' and '-'
// (those fileblob stores unescaped). A crash leaves at most a temporary
// file, named .<name>.<random>.tmp beside the blob.
//
// An S3-compatible server that ignores If-None-Match would let every
// writer win: [Store.Check] creates a key twice, so a worker finds such a
// server when it starts.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	var err error
	if s.dir != "" {
		err = s.createFile(ctx, key, data)
	} else {
		err = s.bucket.WriteAll(ctx, key, data, s.whole(&blob.WriterOptions{IfNotExist: true}))
		if lostCreate(err) {
			err = ErrExists
		}
	}
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	if err != nil {
		return fmt.Errorf("blob: create %s: %w", key, err)
	}
	s.forget(key)
	return nil
}

// lostCreate reports whether err is a conditional write that found its key
// taken. The service's own error code is asked first: gocloud's s3blob
// takes any S3 error whose text holds "301" for a missing bucket (a
// redirect), and a 412's random request or host id can hold it.
func lostCreate(err error) bool {
	if err == nil {
		return false
	}
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() == "PreconditionFailed" {
		return true
	}
	return gcerrors.Code(err) == gcerrors.FailedPrecondition
}

// plainKey is a key that fileblob maps to a path unescaped.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// plainPath is the path of key in a file store, if the store's bucket
// keeps it there unescaped: a key of plainKey's letters, not an .attrs
// file's, with no "." or ".." element.
func (s *Store) plainPath(key string) (string, bool) {
	if s.dir == "" {
		return "", false
	}
	key = s.prefix + key
	elems := strings.Split(key, "/")
	if !plainKey.MatchString(key) || strings.HasSuffix(key, ".attrs") || slices.Contains(elems, ".") || slices.Contains(elems, "..") {
		return "", false
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), true
}

// createFile is Create in a file store: a temporary file, then a hard
// link, which fails if the blob exists.
func (s *Store) createFile(ctx context.Context, key string, data []byte) error {
	path, ok := s.plainPath(key)
	if !ok {
		return fmt.Errorf("a file store creates keys of letters, digits, '.', '_' and '-' only")
	}
	dir := filepath.Dir(path)
	err := os.MkdirAll(dir, 0o777)
	if err != nil {
		return err
	}
	// Mode 0666 and the umask, as fileblob's blobs (os.CreateTemp would
	// make it 0600).
	var tmp *os.File
	for {
		name := filepath.Join(dir, "."+filepath.Base(path)+"."+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		if tmp, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		return err
	}
	return nil
}
