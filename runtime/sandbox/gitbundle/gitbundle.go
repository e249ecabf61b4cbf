// Package gitbundle carries a git repository from a client's disk to the
// workers through the blob store, for sandboxes on hosts that cannot see
// the client's files.
//
// The contract, in order:
//
//  1. A client packs a local repository (Pack) as a git bundle (v2, the
//     format `git bundle` writes and `git clone` reads): HEAD, every
//     branch, tag and remote-tracking branch, and every object they
//     reach, bounded by Limits.MaxBytes. Nothing else of the repository
//     travels: no work tree, no config (remotes' credentials), no hooks.
//  2. It stores the bundle in the workers' blob store under a key whose
//     last element is the bundle's SHA-256 (troupe.InputKey puts it under
//     its run, so the run's retention sweeps it), and passes Ref(key),
//     "blob:KEY", where it would have passed the path (a run variable).
//  3. A worker's Spool fetches the bundle once per host, checks its size
//     and its hash, checks every reference name and the pack's sizes
//     (declared and, for deltas, resolved) before anything is written,
//     and unpacks it as a bare repository in a directory of its own:
//     Spool.Dir/<sha256>. No name from the bundle becomes a path outside
//     its refs/, so no bundle, however made, writes outside that
//     directory. The path is what a git_repo manifest entry takes as its
//     Source (the spool must be under the sandbox policy's allowed roots),
//     and what go-git opens on the host.
//  4. Spool.Reap removes the repositories no run has opened for a while,
//     and what an unpack cut short left.
//
// Resolve turns a run variable into a host path with the Spool the worker
// put in the context (WithSpool); a value that is no reference is returned
// as it is.
package gitbundle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/revlist"

	"github.com/troupe-dev/troupe/runtime/blob"
)

// Scheme prefixes a run variable that names a repository in the blob
// store: "blob:" and the blob's key.
const Scheme = "blob:"

// Defaults of Limits.
const (
	// DefaultMaxBytes bounds a bundle: 256 MiB.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxUnpacked bounds the bytes of a bundle's objects once
	// inflated and their deltas resolved: 2 GiB.
	DefaultMaxUnpacked = 2 << 30
	// DefaultMaxRefs bounds the references of a bundle.
	DefaultMaxRefs = 100_000
)

// Errors callers branch on.
var (
	// ErrNotRepository reports a directory Pack cannot open as a git
	// repository.
	ErrNotRepository = errors.New("gitbundle: not a git repository")
	// ErrTooLarge reports a bundle past Limits.
	ErrTooLarge = errors.New("gitbundle: repository too large")
	// ErrRefused reports a bundle a worker does not unpack: its bytes do
	// not match its hash, or it is malformed, or it names a reference
	// that is not a safe git reference name.
	ErrRefused = errors.New("gitbundle: bundle refused")
	// ErrNoSpool reports a reference resolved where no Spool is at hand.
	ErrNoSpool = errors.New("gitbundle: no spool for repositories in the blob store")
)

// Limits bound what Pack writes and a Spool unpacks. The zero value
// takes the defaults.
type Limits struct {
	// MaxBytes bounds the bundle itself; DefaultMaxBytes when 0.
	MaxBytes int64
	// MaxUnpacked bounds the sum of the objects' sizes, inflated, with
	// deltas counted at the size they resolve to; DefaultMaxUnpacked
	// when 0.
	MaxUnpacked int64
	// MaxRefs bounds the references; DefaultMaxRefs when 0.
	MaxRefs int
}

func (l Limits) maxBytes() int64 {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return DefaultMaxBytes
}

func (l Limits) maxUnpacked() int64 {
	if l.MaxUnpacked > 0 {
		return l.MaxUnpacked
	}
	return DefaultMaxUnpacked
}

func (l Limits) maxRefs() int {
	if l.MaxRefs > 0 {
		return l.MaxRefs
	}
	return DefaultMaxRefs
}

// Ref is the run variable that names the bundle under key.
func Ref(key string) string { return Scheme + key }

// KeyOf returns the blob key a run variable names, and whether it names
// one (starts with Scheme).
func KeyOf(v string) (string, bool) {
	return strings.CutPrefix(v, Scheme)
}

// sumOf is the SHA-256 a bundle's key ends with, or an error.
func sumOf(key string) (string, error) {
	sum := path.Base(key)
	if !hexSum.MatchString(sum) {
		return "", fmt.Errorf("%w: key %q does not end with the bundle's SHA-256", ErrRefused, key)
	}
	return sum, nil
}

var hexSum = regexp.MustCompile(`^[0-9a-f]{64}$`)

const header = "# v2 git bundle\n"

// Packed is what Pack wrote.
type Packed struct {
	// Size is the bundle's length in bytes.
	Size int64
	// SHA256 is the bundle's SHA-256, in hex: the last element of its key.
	SHA256 string
	// Head is the commit HEAD names.
	Head string
	// Refs counts the references in the bundle, HEAD included.
	Refs int
}

// Pack writes the repository at dir (its work tree or its git directory;
// a linked work tree too) to w as a git bundle: HEAD, its branches, tags
// and remote-tracking branches, and every object they reach. A bundle
// past lim.MaxBytes stops with ErrTooLarge; a directory that is not a
// repository, or whose HEAD names no commit, fails with ErrNotRepository.
func Pack(ctx context.Context, dir string, w io.Writer, lim Limits) (Packed, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return Packed{}, fmt.Errorf("%w: %s: %v", ErrNotRepository, dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return Packed{}, fmt.Errorf("%w: %s: its HEAD names no commit: %v", ErrNotRepository, dir, err)
	}
	refs := []*plumbing.Reference{plumbing.NewHashReference(plumbing.HEAD, head.Hash())}
	iter, err := repo.References()
	if err != nil {
		return Packed{}, fmt.Errorf("gitbundle: references of %s: %w", dir, err)
	}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		n := r.Name()
		if r.Type() == plumbing.HashReference && (n.IsBranch() || n.IsTag() || n.IsRemote()) {
			refs = append(refs, r)
		}
		return nil
	})
	if err != nil {
		return Packed{}, fmt.Errorf("gitbundle: references of %s: %w", dir, err)
	}
	seen := map[plumbing.Hash]bool{}
	var tips []plumbing.Hash
	for _, r := range refs {
		if !seen[r.Hash()] {
			seen[r.Hash()] = true
			tips = append(tips, r.Hash())
		}
	}
	if err := ctx.Err(); err != nil {
		return Packed{}, err
	}
	objects, err := revlist.Objects(repo.Storer, tips, nil)
	if err != nil {
		return Packed{}, fmt.Errorf("gitbundle: objects of %s (a shallow or damaged repository?): %w", dir, err)
	}
	h := sha256.New()
	lw := &limitWriter{w: io.MultiWriter(w, h), left: lim.maxBytes()}
	bw := bufio.NewWriter(lw)
	fmt.Fprint(bw, header)
	for _, r := range refs {
		fmt.Fprintf(bw, "%s %s\n", r.Hash(), r.Name())
	}
	fmt.Fprint(bw, "\n")
	if _, err := packfile.NewEncoder(bw, repo.Storer, false).Encode(objects, 10); err != nil {
		if lw.over {
			return Packed{}, tooLarge(dir, lim)
		}
		return Packed{}, fmt.Errorf("gitbundle: pack %s: %w", dir, err)
	}
	if err := bw.Flush(); err != nil {
		if lw.over {
			return Packed{}, tooLarge(dir, lim)
		}
		return Packed{}, fmt.Errorf("gitbundle: pack %s: %w", dir, err)
	}
	return Packed{Size: lw.n, SHA256: hex.EncodeToString(h.Sum(nil)), Head: head.Hash().String(), Refs: len(refs)}, nil
}

func tooLarge(dir string, lim Limits) error {
	return fmt.Errorf("%w: %s packs to more than %d MiB", ErrTooLarge, dir, lim.maxBytes()>>20)
}

// limitWriter fails writes past left bytes.
type limitWriter struct {
	w    io.Writer
	left int64
	n    int64
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.over = true
		return 0, ErrTooLarge
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	l.n += int64(n)
	return n, err
}

// Spool unpacks the bundles a worker's runs name into a directory of the
// worker, once per bundle. Dir and Store are required; a Spool is safe
// for concurrent use.
type Spool struct {
	// Dir holds the repositories, each in Dir/<sha256>. Give sandboxes
	// access to it (the sandbox policy's allowed roots) for git_repo
	// entries to copy from it.
	Dir string
	// Store is the blob store the bundles are read from.
	Store *blob.Store
	// Limits bound the bundles it unpacks.
	Limits Limits

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// lock serializes the work on one bundle in this process.
func (s *Spool) lock(sum string) func() {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*sync.Mutex{}
	}
	l, ok := s.locks[sum]
	if !ok {
		l = &sync.Mutex{}
		s.locks[sum] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Open returns the path of the bare repository the run variable ref
// (Ref of a bundle's key) names, fetching and unpacking the bundle when
// this spool has not yet. A bundle the store does not hold fails
// wrapping blob.ErrNotFound; one past Limits with ErrTooLarge; one whose
// bytes do not match its key's hash, or that is malformed or names an
// unsafe reference, with ErrRefused, and nothing of it stays on disk.
func (s *Spool) Open(ctx context.Context, ref string) (string, error) {
	key, ok := KeyOf(ref)
	if !ok {
		return "", fmt.Errorf("gitbundle: %q is not a reference to a bundle (%s<key>)", ref, Scheme)
	}
	sum, err := sumOf(key)
	if err != nil {
		return "", err
	}
	root, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", fmt.Errorf("gitbundle: spool %s: %w", s.Dir, err)
	}
	dir := filepath.Join(root, sum)
	defer s.lock(sum)()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // Used: Reap keeps it.
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("gitbundle: spool %s: %w", root, err)
	}
	f, err := s.fetch(ctx, key, sum, root)
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	tmp, err := os.MkdirTemp(root, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("gitbundle: spool %s: %w", root, err)
	}
	if err := s.unpack(f, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("bundle %s: %w", key, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, "HEAD")); serr == nil {
			return dir, nil // Another process of this host unpacked it first.
		}
		return "", fmt.Errorf("gitbundle: spool %s: %w", root, err)
	}
	return dir, nil
}

// fetch copies the bundle under key into a file of root, checking its
// size and hash, and returns the file, at its start.
func (s *Spool) fetch(ctx context.Context, key, sum, root string) (*os.File, error) {
	r, err := s.Store.Open(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("gitbundle: the blob store of this worker does not hold the repository %s that the client put in its own: "+
			"the client and the workers must share one store (TROUPE_BLOB_URL): %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("gitbundle: the repository %s: %w", key, err)
	}
	defer r.Close()
	f, err := os.CreateTemp(root, ".fetch-")
	if err != nil {
		return nil, fmt.Errorf("gitbundle: spool %s: %w", root, err)
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	h := sha256.New()
	max := s.Limits.maxBytes()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, max+1))
	switch {
	case err != nil:
		return fail(fmt.Errorf("gitbundle: fetch %s: %w", key, err))
	case n > max:
		return fail(fmt.Errorf("%w: bundle %s is over this worker's limit of %d MiB", ErrTooLarge, key, max>>20))
	case hex.EncodeToString(h.Sum(nil)) != sum:
		return fail(fmt.Errorf("%w: bundle %s: its bytes do not match the SHA-256 its key names", ErrRefused, key))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, nil
}

// unpack checks the bundle in f and unpacks it into dir as a bare
// repository.
func (s *Spool) unpack(f *os.File, dir string) error {
	refs, offset, err := readHeader(bufio.NewReader(f), s.Limits.maxRefs())
	if err != nil {
		return err
	}
	pack := func() io.Reader {
		return io.NewSectionReader(f, offset, 1<<62)
	}
	if err := checkPack(pack(), s.Limits.maxUnpacked()); err != nil {
		return err
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return fmt.Errorf("gitbundle: init %s: %w", dir, err)
	}
	if err := packfile.UpdateObjectStorage(repo.Storer, pack()); err != nil {
		return fmt.Errorf("%w: its pack: %v", ErrRefused, err)
	}
	for _, r := range refs {
		if _, err := repo.Storer.EncodedObject(plumbing.AnyObject, r.Hash()); err != nil {
			return fmt.Errorf("%w: reference %s names %s, which the pack does not hold", ErrRefused, r.Name(), r.Hash())
		}
		if err := repo.Storer.SetReference(r); err != nil {
			return fmt.Errorf("gitbundle: set %s: %w", r.Name(), err)
		}
	}
	return nil
}

// readHeader reads a v2 bundle's header: its references, each checked,
// and the offset of its pack.
func readHeader(r *bufio.Reader, maxRefs int) ([]*plumbing.Reference, int64, error) {
	var offset int64
	line := func() (string, error) {
		// A line longer than any reference name git takes is no header.
		s, err := r.ReadSlice('\n')
		offset += int64(len(s))
		if err != nil {
			return "", fmt.Errorf("%w: its header: %v", ErrRefused, err)
		}
		return strings.TrimSuffix(string(s), "\n"), nil
	}
	first, err := line()
	if err != nil {
		return nil, 0, err
	}
	if first+"\n" != header {
		return nil, 0, fmt.Errorf("%w: not a v2 git bundle", ErrRefused)
	}
	var refs []*plumbing.Reference
	for {
		l, err := line()
		if err != nil {
			return nil, 0, err
		}
		if l == "" {
			break
		}
		if len(refs) == maxRefs {
			return nil, 0, fmt.Errorf("%w: more than %d references", ErrTooLarge, maxRefs)
		}
		if strings.HasPrefix(l, "-") {
			return nil, 0, fmt.Errorf("%w: a bundle that needs commits it does not hold (%s)", ErrRefused, l)
		}
		hash, name, ok := strings.Cut(l, " ")
		if !ok || !plumbing.IsHash(hash) || len(hash) != 40 {
			return nil, 0, fmt.Errorf("%w: header line %q", ErrRefused, l)
		}
		n := plumbing.ReferenceName(name)
		if n != plumbing.HEAD && (!n.IsSafe() || n.Validate() != nil || !strings.HasPrefix(name, "refs/")) {
			return nil, 0, fmt.Errorf("%w: reference name %q is not a safe git reference", ErrRefused, name)
		}
		refs = append(refs, plumbing.NewHashReference(n, plumbing.NewHash(hash)))
	}
	return refs, offset, nil
}

// checkPack reads the pack through, before anything is written, and
// refuses one whose objects would take more than max bytes: their sizes
// as declared (an object inflates to no more, go-git checks) and, for a
// delta, the size it resolves to, as its data declares it.
func checkPack(r io.Reader, max int64) error {
	sc := packfile.NewScanner(r)
	_, n, err := sc.Header()
	if err != nil {
		return fmt.Errorf("%w: its pack: %v", ErrRefused, err)
	}
	var total int64
	for i := uint32(0); i < n; i++ {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("%w: its pack, object %d: %v", ErrRefused, i, err)
		}
		size := h.Length
		var head deltaHead
		if h.Type == plumbing.OFSDeltaObject || h.Type == plumbing.REFDeltaObject {
			if _, _, err := sc.NextObject(&head); err != nil {
				return fmt.Errorf("%w: its pack, object %d: %v", ErrRefused, i, err)
			}
			if size, err = head.target(); err != nil {
				return fmt.Errorf("%w: its pack, object %d: %v", ErrRefused, i, err)
			}
		} else if _, _, err := sc.NextObject(io.Discard); err != nil {
			return fmt.Errorf("%w: its pack, object %d: %v", ErrRefused, i, err)
		}
		if total += size; size < 0 || total > max {
			return fmt.Errorf("%w: its objects take more than %d MiB unpacked", ErrTooLarge, max>>20)
		}
	}
	if _, err := sc.Checksum(); err != nil {
		return fmt.Errorf("%w: its pack's checksum: %v", ErrRefused, err)
	}
	return nil
}

// deltaHead keeps the start of a delta's data: its source and target
// sizes, two varints.
type deltaHead struct {
	b []byte
}

func (d *deltaHead) Write(p []byte) (int, error) {
	if room := 20 - len(d.b); room > 0 {
		d.b = append(d.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// target is the size the delta resolves to.
func (d *deltaHead) target() (int64, error) {
	b := d.b
	var sizes [2]int64
	for i := range sizes {
		var v int64
		var shift uint
		for {
			if len(b) == 0 || shift > 56 {
				return 0, errors.New("a delta with no sizes")
			}
			c := b[0]
			b = b[1:]
			v |= int64(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				break
			}
		}
		sizes[i] = v
	}
	return sizes[1], nil
}

// Reap removes the repositories of the spool that no Open used for
// unused, and what unpacks cut short left (older than an hour). It
// returns how many it removed.
func (s *Spool) Reap(unused time.Duration) (int, error) {
	root, err := filepath.Abs(s.Dir)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("gitbundle: reap %s: %w", root, err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		name := e.Name()
		age := unused
		switch {
		case hexSum.MatchString(name):
		case strings.HasPrefix(name, ".fetch-"), strings.HasPrefix(name, ".unpack-"):
			age = time.Hour
		default:
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < age {
			continue
		}
		unlock := func() {}
		if hexSum.MatchString(name) {
			unlock = s.lock(name)
			// Opened meanwhile?
			if info, err := os.Stat(filepath.Join(root, name)); err != nil || time.Since(info.ModTime()) < age {
				unlock()
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
			errs = append(errs, err)
		} else {
			removed++
		}
		unlock()
	}
	return removed, errors.Join(errs...)
}

type spoolKey struct{}

// WithSpool returns ctx carrying s, for Resolve.
func WithSpool(ctx context.Context, s *Spool) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, spoolKey{}, s)
}

// SpoolFrom returns the Spool of ctx, if any.
func SpoolFrom(ctx context.Context) (*Spool, bool) {
	s, ok := ctx.Value(spoolKey{}).(*Spool)
	return s, ok
}

// Resolve returns v, a run variable naming a repository, as a host path
// when it is a reference to a bundle (Ref), unpacked by the Spool of ctx;
// any other value as it is. A reference with no Spool in ctx fails with
// ErrNoSpool.
func Resolve(ctx context.Context, v string) (string, error) {
	if _, ok := KeyOf(v); !ok {
		return v, nil
	}
	s, ok := SpoolFrom(ctx)
	if !ok {
		return "", fmt.Errorf("%w: %q names a repository in the blob store, and this worker unpacks none (workflows.Config.RepoDir)", ErrNoSpool, v)
	}
	return s.Open(ctx, v)
}
