package codereview

// This file computes the change under review on the host, with go-git:
// which commits a ref or a range names, and the patch between them. The
// reviewers' manifests carry the patch as change.diff.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// MaxPatchBytes bounds change.diff; a longer patch is cut at a line
// boundary and ends with a note saying how much was left out.
const MaxPatchBytes = 1 << 20

// ErrBadRange reports a ref or range that does not name commits.
var ErrBadRange = errors.New("codereview: bad ref")

// Change is a ref or range resolved in a repository, and its patch.
type Change struct {
	// From is the commit the patch starts at: the first parent of a single
	// ref, the start of a range, or the merge base of an A...B range. It
	// is empty for a root commit, whose patch adds every file.
	From string `json:"from,omitempty"`
	// To is the commit under review: the ref itself or the end of the
	// range. Reviewers get its work tree.
	To string `json:"to"`
	// Patch is the unified diff from From to To, at most MaxPatchBytes.
	Patch string `json:"patch"`
	// Truncated says whether Patch was cut.
	Truncated bool `json:"truncated,omitempty"`
}

// Range is a parsed ref: a single revision, or a range "A..B" (the patch
// between A and B) or "A...B" (the patch from their merge base to B).
// An empty side of a range means HEAD, as in git.
type Range struct {
	From, To string
	// IsRange is false for a single revision, whose patch is against its
	// first parent.
	IsRange bool
	// MergeBase marks an A...B range.
	MergeBase bool
}

// ParseRange parses ref; empty means HEAD.
func ParseRange(ref string) (Range, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Range{To: "HEAD"}, nil
	}
	sep, mergeBase := "..", false
	if strings.Contains(ref, "...") {
		sep, mergeBase = "...", true
	}
	from, to, ok := strings.Cut(ref, sep)
	if !ok {
		return Range{To: ref}, nil
	}
	if strings.Contains(to, "..") {
		return Range{}, fmt.Errorf("%w: %q has more than one range separator", ErrBadRange, ref)
	}
	if from == "" {
		from = "HEAD"
	}
	if to == "" {
		to = "HEAD"
	}
	return Range{From: from, To: to, IsRange: true, MergeBase: mergeBase}, nil
}

// Diff opens (a local path) or clones into memory (a URL) the repository
// source, resolves ref (see ParseRange) and returns the change with its
// patch. For a single ref the patch is against the commit's first parent.
func Diff(ctx context.Context, source, ref string) (*Change, error) {
	r, err := ParseRange(ref)
	if err != nil {
		return nil, err
	}
	repo, cloned, err := openRepo(ctx, source)
	if err != nil {
		return nil, err
	}
	to, err := commitAt(repo, r.To, cloned)
	if err != nil {
		return nil, err
	}
	var from *object.Commit
	switch {
	case r.IsRange:
		if from, err = commitAt(repo, r.From, cloned); err != nil {
			return nil, err
		}
		if r.MergeBase {
			bases, err := from.MergeBase(to)
			if err != nil {
				return nil, fmt.Errorf("codereview: merge base of %q: %w", ref, err)
			}
			if len(bases) == 0 {
				return nil, fmt.Errorf("%w: %s and %s have no common ancestor", ErrBadRange, r.From, r.To)
			}
			from = bases[0]
		}
	case to.NumParents() > 0:
		if from, err = to.Parent(0); err != nil {
			return nil, fmt.Errorf("codereview: first parent of %s: %w", r.To, err)
		}
	}
	patch, err := patchBetween(ctx, from, to)
	if err != nil {
		return nil, err
	}
	ch := &Change{To: to.Hash.String()}
	if from != nil {
		ch.From = from.Hash.String()
	}
	ch.Patch, ch.Truncated = truncatePatch(patch, MaxPatchBytes)
	return ch, nil
}

func patchBetween(ctx context.Context, from, to *object.Commit) (string, error) {
	var fromTree *object.Tree // nil: the empty tree, for a root commit
	if from != nil {
		t, err := from.Tree()
		if err != nil {
			return "", err
		}
		fromTree = t
	}
	toTree, err := to.Tree()
	if err != nil {
		return "", err
	}
	changes, err := object.DiffTreeWithOptions(ctx, fromTree, toTree, object.DefaultDiffTreeOptions)
	if err != nil {
		return "", fmt.Errorf("codereview: diff: %w", err)
	}
	patch, err := changes.PatchContext(ctx)
	if err != nil {
		return "", fmt.Errorf("codereview: patch: %w", err)
	}
	return patch.String(), nil
}

// truncatePatch cuts patch to at most max bytes (plus the note) at a line
// boundary.
func truncatePatch(patch string, max int) (string, bool) {
	if len(patch) <= max {
		return patch, false
	}
	cut := patch[:max]
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 {
		cut = cut[:i+1]
	}
	return cut + fmt.Sprintf("[troupe: diff truncated: %d of %d bytes shown]\n", len(cut), len(patch)), true
}

// remoteURL matches what go-git clones over the network: URLs with a
// scheme other than file, and scp-like [user@]host:path.
var remoteURL = regexp.MustCompile(`^([a-z][a-z0-9+.-]*://|([A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+:[^:])`)

// Source turns the repo run variable into a git_repo source: a URL as
// it is, a file:// URL or a local path as an absolute path (relative to
// the worker's directory), since sandbox manifests take host paths only
// when absolute.
func Source(repo string) (string, error) {
	switch {
	case repo == "":
		return "", fmt.Errorf("%w: no repository", ErrBadRange)
	case strings.HasPrefix(repo, "file://"):
		u, err := url.Parse(repo)
		if err != nil || u.Path == "" {
			return "", fmt.Errorf("codereview: repository %q is not a file URL", repo)
		}
		return u.Path, nil
	case filepath.IsAbs(repo):
		return filepath.Clean(repo), nil
	case remoteURL.MatchString(repo):
		return repo, nil
	}
	return filepath.Abs(repo)
}

// openRepo opens source, or clones it into memory when it is a URL
// (cloned is then true).
func openRepo(ctx context.Context, source string) (repo *git.Repository, cloned bool, err error) {
	src, err := Source(source)
	if err != nil {
		return nil, false, err
	}
	if filepath.IsAbs(src) {
		repo, err = git.PlainOpenWithOptions(src, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
		if err != nil {
			return nil, false, fmt.Errorf("codereview: open repository %s: %w", src, err)
		}
		return repo, false, nil
	}
	repo, err = git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{URL: src, Tags: git.AllTags})
	if err != nil {
		return nil, false, fmt.Errorf("codereview: clone %s: %w", src, err)
	}
	return repo, true, nil
}

// commitAt resolves rev; in a clone, branches live under origin/.
func commitAt(repo *git.Repository, rev string, cloned bool) (*object.Commit, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil && cloned {
		h, err = repo.ResolveRevision(plumbing.Revision("origin/" + rev))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadRange, rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a commit: %v", ErrBadRange, rev, err)
	}
	return c, nil
}

// changeCache shares one Diff among the reviewers of a run, which
// provision their sandboxes at the same time: one clone of a remote
// instead of one per reviewer, and the same commits for all of them even
// if a branch moves meanwhile. Entries expire after changeTTL; failures
// are not kept.
type changeCache struct {
	mu sync.Mutex
	m  map[string]*cachedChange
}

type cachedChange struct {
	once sync.Once
	at   time.Time
	ch   *Change
	err  error
}

const changeTTL = 10 * time.Minute

var changes = &changeCache{m: map[string]*cachedChange{}}

func (c *changeCache) get(key string, compute func() (*Change, error)) (*Change, error) {
	c.mu.Lock()
	now := time.Now()
	for k, e := range c.m {
		if now.Sub(e.at) > changeTTL {
			delete(c.m, k)
		}
	}
	e, ok := c.m[key]
	if !ok {
		e = &cachedChange{at: now}
		c.m[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.ch, e.err = compute() })
	if e.err != nil {
		c.mu.Lock()
		if c.m[key] == e {
			delete(c.m, key)
		}
		c.mu.Unlock()
	}
	return e.ch, e.err
}
