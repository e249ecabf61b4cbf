package skills

// The sources of skills. Each one lists a tree of files (a host
// directory, a git tree, an fs.FS) and hands it to bundle, which finds
// the skills in it and applies the rules of skill.go, reading no file
// beyond the limits.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Source is where skills come from. New loads every source once, when
// the capability is made (on the worker, never in workflow code).
//
// A source that reads a tree of folders (Dir, FS, Git) finds its skills
// the same way: when the tree's root holds a SKILL.md, the root is one
// skill; otherwise each folder of the root that holds a SKILL.md is one,
// and the root's other files and folders are left alone.
type Source interface {
	// Load reads the source's skills, each validated against opts.Limits.
	// Its errors are *Error values.
	Load(ctx context.Context, opts LoadOptions) ([]Skill, error)
}

// LoadOptions are what a Source loads under.
type LoadOptions struct {
	// Policy bounds the host paths a source may read (Dir, and Git with a
	// local path): only those under its AllowedRoots. The zero Policy
	// allows none.
	Policy sandbox.Policy
	// Limits bound each skill (zero fields take the defaults).
	Limits Limits
}

// Inline is a source of skills written as Go values. A skill whose Files
// hold no SKILL.md gets one made from its Name, Description and
// Instructions; one whose Files hold a SKILL.md takes its fields from it.
type Inline []Skill

// Load implements Source.
func (in Inline) Load(_ context.Context, opts LoadOptions) ([]Skill, error) {
	out := make([]Skill, 0, len(in))
	for _, s := range in {
		files := append([]File(nil), s.Files...)
		if _, ok := s.file(SkillFile); !ok {
			md, err := skillFile(s)
			if err != nil {
				return nil, &Error{Source: "inline", Skill: s.Name, Err: err}
			}
			files = append(files, File{Path: SkillFile, Content: md})
		}
		loaded, err := fromFiles("", files, opts.Limits)
		if err != nil {
			return nil, &Error{Source: "inline", Skill: s.Name, Err: err}
		}
		out = append(out, loaded)
	}
	return out, nil
}

// Dir is a source of skills in a host directory, which must lie under
// LoadOptions.Policy's AllowedRoots (sandbox.ErrSourceNotAllowed
// otherwise). The directory is read through an os.Root, so nothing
// outside it is read, and a symlink anywhere in a skill is rejected with
// ErrSymlink.
type Dir string

// Load implements Source.
func (d Dir) Load(ctx context.Context, opts LoadOptions) ([]Skill, error) {
	src := "dir " + string(d)
	resolved, err := opts.Policy.Allows(string(d))
	if err != nil {
		return nil, &Error{Source: src, Err: err}
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, &Error{Source: src, Err: err}
	}
	defer root.Close()
	return FS{FS: root.FS(), Name: filepath.Base(filepath.Clean(string(d))), label: src}.Load(ctx, opts)
}

// FS is a source of skills in a file system, such as an embed.FS that
// ships skills inside the worker's binary.
type FS struct {
	// FS holds the tree.
	FS fs.FS
	// Dir is the tree's root in FS; empty means ".".
	Dir string
	// Name is the root folder's name, which a skill at the root must
	// have; empty means the base of Dir (none for ".").
	Name string
	// label names the source in errors; empty means "fs".
	label string
}

// Load implements Source.
func (f FS) Load(ctx context.Context, opts LoadOptions) ([]Skill, error) {
	src := f.label
	if src == "" {
		src = "fs " + f.Dir
	}
	dir := f.Dir
	if dir == "" {
		dir = "."
	}
	name := f.Name
	if name == "" && dir != "." {
		name = path.Base(dir)
	}
	if !fs.ValidPath(dir) {
		return nil, &Error{Source: src, Err: fmt.Errorf("%w: %q is not a valid fs path", sandbox.ErrPathEscape, dir)}
	}
	var nodes []node
	err := fs.WalkDir(f.FS, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if dir == "." {
			rel = p
		}
		if rel == "" || rel == "." {
			return nil
		}
		n := node{path: rel}
		switch t := d.Type(); {
		case d.IsDir():
			n.dir = true
		case t&fs.ModeSymlink != 0:
			n.link = true
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			n.size, n.exec = info.Size(), info.Mode()&0o111 != 0
			n.open = func() (io.ReadCloser, error) { return f.FS.Open(p) }
		default:
			n.special = true
		}
		nodes = append(nodes, n)
		return nil
	})
	if err != nil {
		return nil, &Error{Source: src, Err: err}
	}
	return bundle(ctx, src, name, nodes, opts.Limits)
}

// Git is a source of skills in a git repository, read with go-git on the
// host: a remote URL (http, https, ssh, git, or scp-like) is cloned into
// a temporary directory, bare; a local path (absolute, or file://) is
// read in place and must lie under LoadOptions.Policy's AllowedRoots.
// Only committed files are read. A symlink in a skill is rejected with
// ErrSymlink; submodules are skipped.
type Git struct {
	// URL is the repository: a URL or an absolute host path.
	URL string
	// Ref is the branch, tag or commit to read; empty means HEAD.
	Ref string
	// Subpath is the folder of the repository that holds the skills (or
	// is one); empty means the repository's root.
	Subpath string
	// Depth limits the history a remote clone fetches; zero means all.
	// With a Depth, Ref must be a branch or tag, or a commit within it.
	Depth int
}

// Load implements Source.
func (g Git) Load(ctx context.Context, opts LoadOptions) ([]Skill, error) {
	src := "git " + g.URL
	if g.Ref != "" {
		src += "@" + g.Ref
	}
	if g.Subpath != "" {
		src += ":" + g.Subpath
	}
	fail := func(err error) ([]Skill, error) { return nil, &Error{Source: src, Err: err} }
	sub := strings.Trim(g.Subpath, "/")
	if sub != "" && (!fs.ValidPath(sub) || strings.Contains(sub, "\\")) {
		return fail(fmt.Errorf("%w: subpath %q is not a clean relative path", sandbox.ErrPathEscape, g.Subpath))
	}
	local, remote, err := sandbox.GitSource(g.URL)
	if err != nil {
		return fail(err)
	}
	var repo *git.Repository
	if remote == "" {
		resolved, err := opts.Policy.Allows(local)
		if err != nil {
			return fail(err)
		}
		if repo, err = git.PlainOpenWithOptions(resolved, &git.PlainOpenOptions{EnableDotGitCommonDir: true}); err != nil {
			return fail(fmt.Errorf("open: %w", err))
		}
	} else {
		tmp, err := os.MkdirTemp("", "troupe-skills-*")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(tmp)
		storage := filesystem.NewStorage(osfs.New(tmp), cache.NewObjectLRUDefault())
		repo, err = git.CloneContext(ctx, storage, nil, &git.CloneOptions{URL: remote, Depth: g.Depth, Tags: git.AllTags})
		if err != nil {
			return fail(fmt.Errorf("clone: %w", err))
		}
	}
	hash, err := host.ResolveRef(repo, g.Ref, remote != "")
	if err != nil {
		return fail(err)
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return fail(fmt.Errorf("ref %q: %w", g.Ref, err))
	}
	tree, err := commit.Tree()
	if err != nil {
		return fail(err)
	}
	name := ""
	if sub != "" {
		if tree, err = tree.Tree(sub); err != nil {
			return fail(fmt.Errorf("subpath %q: %w", sub, err))
		}
		name = path.Base(sub)
	}
	var nodes []node
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		p, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		n := node{path: p}
		switch e.Mode {
		case filemode.Dir:
			n.dir = true
		case filemode.Submodule:
			continue
		case filemode.Symlink:
			n.link = true
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			blob, err := repo.BlobObject(e.Hash)
			if err != nil {
				return fail(err)
			}
			n.size, n.exec = blob.Size, e.Mode == filemode.Executable
			n.open = blob.Reader
		default:
			n.special = true
		}
		nodes = append(nodes, n)
	}
	return bundle(ctx, src, name, nodes, opts.Limits)
}

// node is one entry of a source's tree, by slash path from its root.
type node struct {
	path               string
	dir, link, special bool
	exec               bool
	// size is the file's, or -1 when the listing does not say (a learnt
	// skill's): then the limits are checked as the file is read.
	size int64
	open func() (io.ReadCloser, error)
}

// bundle finds the skills in a tree (see Source) and reads them: the
// root is a skill when it holds SKILL.md, else each top folder that does.
// rootName is the root folder's name ("" when it has none to check).
func bundle(ctx context.Context, src, rootName string, nodes []node, lim Limits) ([]Skill, error) {
	lim = lim.withDefaults()
	type group struct {
		folder string
		nodes  []node
	}
	var groups []*group
	isSkill := func(n node) bool { return !n.dir && path.Base(n.path) == SkillFile }
	rootSkill := false
	for _, n := range nodes {
		if n.path == SkillFile && !n.dir {
			rootSkill = true
		}
	}
	if rootSkill {
		groups = []*group{{folder: rootName, nodes: nodes}}
	} else {
		byFolder := map[string]*group{}
		for _, n := range nodes {
			top, rest, nested := strings.Cut(n.path, "/")
			if nested && rest == SkillFile && isSkill(n) {
				g := &group{folder: top}
				byFolder[top] = g
				groups = append(groups, g)
			}
		}
		for _, n := range nodes {
			top, rest, nested := strings.Cut(n.path, "/")
			if g, ok := byFolder[top]; ok && nested {
				n.path = rest
				g.nodes = append(g.nodes, n)
			}
		}
	}
	if len(groups) > lim.MaxSkills {
		return nil, &Error{Source: src, Err: fmt.Errorf("%w: %d skills, over %d", ErrTooLarge, len(groups), lim.MaxSkills)}
	}
	out := make([]Skill, 0, len(groups))
	for _, g := range groups {
		s, err := readSkill(ctx, g.folder, g.nodes, lim)
		if err != nil {
			return nil, &Error{Source: src, Skill: g.folder, Err: err}
		}
		out = append(out, s)
	}
	return out, nil
}

// readSkill reads the files of the skill in folder, checking the limits
// before it reads anything (the sizes the listing gives) and while it
// reads.
func readSkill(ctx context.Context, folder string, nodes []node, lim Limits) (Skill, error) {
	var files int
	var total int64
	for _, n := range nodes {
		switch {
		case n.link:
			return Skill{}, fmt.Errorf("%w: %q is a symlink", ErrSymlink, n.path)
		case n.special:
			return Skill{}, fmt.Errorf("%q is not a regular file", n.path)
		case n.dir:
			continue
		}
		files++
		if n.size < 0 {
			continue
		}
		total += n.size
		if n.size > lim.MaxFileBytes {
			return Skill{}, fmt.Errorf("%w: file %q has %d bytes, over %d", ErrTooLarge, n.path, n.size, lim.MaxFileBytes)
		}
	}
	if files > lim.MaxFiles {
		return Skill{}, fmt.Errorf("%w: %d files, over %d", ErrTooLarge, files, lim.MaxFiles)
	}
	if total > lim.MaxSkillBytes {
		return Skill{}, fmt.Errorf("%w: %d bytes in all, over %d", ErrTooLarge, total, lim.MaxSkillBytes)
	}
	out := make([]File, 0, files)
	var read int64
	for _, n := range nodes {
		if n.dir {
			continue
		}
		if err := ctx.Err(); err != nil {
			return Skill{}, err
		}
		data, err := readAtMost(n.open, lim.MaxFileBytes)
		if err != nil {
			return Skill{}, fmt.Errorf("%s: %w", n.path, err)
		}
		if read += int64(len(data)); read > lim.MaxSkillBytes {
			return Skill{}, fmt.Errorf("%w: over %d bytes in all", ErrTooLarge, lim.MaxSkillBytes)
		}
		out = append(out, File{Path: n.path, Content: data, Executable: n.exec})
	}
	return fromFiles(folder, out, lim)
}

// readAtMost reads a file, failing with ErrTooLarge past max bytes (a
// file that grew since it was listed).
func readAtMost(open func() (io.ReadCloser, error), max int64) (string, error) {
	r, err := open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return "", err
	}
	if int64(len(data)) > max {
		return "", fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	}
	return string(data), nil
}
