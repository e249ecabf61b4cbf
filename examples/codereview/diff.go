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
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

// MaxPatchBytes bounds change.diff; a longer patch is cut at a line
// boundary and ends with a note saying how much was left out.
const MaxPatchBytes = 1 << 20

// ErrBadRange reports a ref or range that does not name commits.
var ErrBadRange = errors.New("codereview: bad ref")

// Change is a ref or range resolved in a repository, and its patch.
type Change struct {
	// From is the commit the patch starts at: the ref of a single ref (or
	// the merge base of it and HEAD, see ParseRange), HEAD's first parent
	// for HEAD, the start of a range, or the merge base of an A...B range.
	// It is empty for a root commit, whose patch adds every file.
	From string `json:"from,omitempty"`
	// To is the last commit under review: HEAD for a single ref (or the ref
	// itself when it is not behind HEAD), the end of a range. Reviewers
	// get its work tree.
	To string `json:"to"`
	// Commits is how many commits the change holds: those reachable from
	// To and not from From (at most maxCounted).
	Commits int `json:"commits"`
	// Patch is the unified diff from From to To, at most MaxPatchBytes.
	Patch string `json:"patch"`
	// Truncated says whether Patch was cut.
	Truncated bool `json:"truncated,omitempty"`
}

// Reviewed names the commits of the change for a person, by their short
// hashes: "abc1234..def5678 (2 commits)", or "def5678 (1 commit, from
// the start of the history)" when From is empty.
func (c *Change) Reviewed() string {
	n := fmt.Sprintf("%d commits", c.Commits)
	switch {
	case c.Commits == 1:
		n = "1 commit"
	case c.Commits > maxCounted:
		n = fmt.Sprintf("more than %d commits", maxCounted)
	}
	if c.From == "" {
		return fmt.Sprintf("%s (%s, from the start of the history)", short(c.To), n)
	}
	return fmt.Sprintf("%s..%s (%s)", short(c.From), short(c.To), n)
}

func short(hash string) string {
	if len(hash) > 7 {
		return hash[:7]
	}
	return hash
}

// Range is a parsed ref: a single revision, or a range "A..B" (the patch
// between A and B) or "A...B" (the patch from their merge base to B).
// An empty side of a range means HEAD, as in git.
type Range struct {
	// From and To are the revisions of a range. A single revision R is
	// From R, To HEAD: the change from R to HEAD. HEAD itself (or an empty
	// ref) is From "", To HEAD: the last commit, against its first parent.
	From, To string
	// IsRange is false for a single revision.
	IsRange bool
	// MergeBase marks an A...B range.
	MergeBase bool
}

// ParseRange parses ref, as a user means it:
//
//   - "" or "HEAD": the last commit, against its first parent;
//   - a single revision R (a commit, HEAD~2, a branch or tag): the change
//     from R to HEAD, R's descendants up to HEAD (so HEAD~1 is the last
//     commit's change, HEAD~3 the last three's). A revision that is not
//     behind HEAD (a feature branch ahead of it, say) is reviewed from
//     where it left HEAD's history: the change from their merge base to
//     R, as "HEAD...R" would. One that names HEAD's commit is the last
//     commit;
//   - "A..B": the change from A to B; "A...B": from their merge base to
//     B. An empty side means HEAD.
func ParseRange(ref string) (Range, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" || ref == "HEAD" {
		return Range{To: "HEAD"}, nil
	}
	sep, mergeBase := "..", false
	if strings.Contains(ref, "...") {
		sep, mergeBase = "...", true
	}
	from, to, ok := strings.Cut(ref, sep)
	if !ok {
		return Range{From: ref, To: "HEAD"}, nil
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
// patch and the number of its commits.
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
	if r.From != "" {
		if from, err = commitAt(repo, r.From, cloned); err != nil {
			return nil, err
		}
	}
	switch {
	case r.IsRange && r.MergeBase:
		if from, err = mergeBase(from, to, r.From, r.To); err != nil {
			return nil, err
		}
	case r.IsRange:
	case from != nil && from.Hash != to.Hash:
		// A single revision: from it to HEAD when it is behind HEAD, else
		// its own commits since it left HEAD's history.
		behind, err := from.IsAncestor(to)
		if err != nil {
			return nil, fmt.Errorf("codereview: is %s behind %s: %w", r.From, r.To, err)
		}
		if !behind {
			base, err := mergeBase(to, from, r.To, r.From)
			if err != nil {
				return nil, err
			}
			from, to = base, from
		}
	default:
		// HEAD, or a revision at HEAD's commit: the last commit.
		from = nil
		if to.NumParents() > 0 {
			if from, err = to.Parent(0); err != nil {
				return nil, fmt.Errorf("codereview: first parent of %s: %w", r.To, err)
			}
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
	if ch.Commits, err = countCommits(from, to); err != nil {
		return nil, err
	}
	ch.Patch, ch.Truncated = truncatePatch(patch, MaxPatchBytes)
	return ch, nil
}

// mergeBase is the best common ancestor of a and b (named an and bn in
// errors).
func mergeBase(a, b *object.Commit, an, bn string) (*object.Commit, error) {
	bases, err := a.MergeBase(b)
	if err != nil {
		return nil, fmt.Errorf("codereview: merge base of %s and %s: %w", an, bn, err)
	}
	if len(bases) == 0 {
		return nil, fmt.Errorf("%w: %s and %s have no common ancestor", ErrBadRange, an, bn)
	}
	return bases[0], nil
}

// maxCounted bounds the commits a change counts: past it, the change has
// "more than maxCounted commits".
const maxCounted = 10000

// countCommits counts the commits reachable from to and not from from
// (all of to's history when from is nil), as git rev-list --count
// from..to does, stopping past maxCounted.
func countCommits(from, to *object.Commit) (int, error) {
	seen := map[plumbing.Hash]bool{}
	if from != nil {
		err := object.NewCommitPreorderIter(from, nil, nil).ForEach(func(c *object.Commit) error {
			seen[c.Hash] = true
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("codereview: history of %s: %w", from.Hash, err)
		}
	}
	n := 0
	err := object.NewCommitPreorderIter(to, seen, nil).ForEach(func(*object.Commit) error {
		n++
		if n > maxCounted {
			return storer.ErrStop
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("codereview: history of %s: %w", to.Hash, err)
	}
	return n, nil
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
