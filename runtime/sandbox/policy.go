package sandbox

// Manifest validation. Validate runs before anything is written: it checks
// the shape of every entry, confines every path to the workspace, and
// confines every host source to the Policy's roots.

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Policy says which host paths a manifest may copy from.
//
// The zero Policy allows no host sources at all: local_file, local_dir
// and git_repo entries with a local path are rejected with
// ErrSourceNotAllowed. Remote git URLs are not host paths and are not
// governed by Policy.
type Policy struct {
	// AllowedRoots are host directories from which local_file, local_dir
	// and local git_repo sources may come. Both the roots and the sources
	// are resolved with filepath.EvalSymlinks before the check, so a
	// symlink inside a root that points outside it does not widen the
	// policy.
	AllowedRoots []string `json:"allowed_roots,omitempty"`
}

// A PolicyHolder is a Client that says which Policy bounds its manifests'
// host sources. The local, bwrap and docker clients are.
type PolicyHolder interface {
	Policy() Policy
}

// Allows checks the absolute host path source against AllowedRoots, as
// Validate checks a manifest's host sources, and returns it resolved
// (symlinks evaluated), or an error wrapping ErrSourceNotAllowed. Other
// readers of the host (skill sources, say) use it to stay within the
// same roots as the manifests.
func (p Policy) Allows(source string) (string, error) { return p.allows(source) }

// allows returns the source resolved, or an error wrapping
// ErrSourceNotAllowed.
func (p Policy) allows(source string) (string, error) {
	if !filepath.IsAbs(source) {
		return "", fmt.Errorf("%w: %q is not an absolute host path", ErrSourceNotAllowed, source)
	}
	resolved, err := filepath.EvalSymlinks(source)
	if err != nil {
		return "", fmt.Errorf("sandbox: source %q: %w", source, err)
	}
	for _, root := range p.AllowedRoots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil || !filepath.IsAbs(r) {
			continue // A missing root allows nothing.
		}
		rel, err := filepath.Rel(r, resolved)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return resolved, nil
		}
	}
	if resolved != source {
		return "", fmt.Errorf("%w: %q (resolves to %q)", ErrSourceNotAllowed, source, resolved)
	}
	return "", fmt.Errorf("%w: %q", ErrSourceNotAllowed, source)
}

// Validate checks the manifest against p before anything is created, and
// returns every problem it finds, joined. For each entry it checks that the
// kind is known; that the path is clean and workspace-relative
// (CleanPath; only dir, local_dir and git_repo may name the root "."); that
// the fields the kind needs are present and the others absent; that the
// mode has permission bits only (no setuid, setgid or sticky bits); that
// host sources exist, have the right type, and lie under p.AllowedRoots
// (ErrSourceNotAllowed); that a local_dir source holds no symlink that is
// absolute or leads out of the source tree (ErrPathEscape, naming the
// link); and that a git_repo's Depth is not negative and its Source is a
// local path or a URL with a known scheme. It also checks the environment's
// names and values.
//
// Validate reads host sources (to resolve and walk them) but writes
// nothing. Escapes found only later, such as a symlink in a git tree, are
// reported by host.Materialize, still before anything is written.
func (m Manifest) Validate(p Policy) error {
	return m.validate(func(e Entry) error { return e.validate(p) })
}

// Check checks what needs no host: each entry's path (workspace-relative,
// no ".." element), kind and fields, and the environment's names and
// values. Validate checks the same and the host sources; an agent graph
// checks its sandbox agents' manifests with Check, so that a bad manifest
// fails when the graph is made, not after a model turn.
func (m Manifest) Check() error {
	return m.validate(func(e Entry) error { _, err := e.check(); return err })
}

func (m Manifest) validate(entry func(Entry) error) error {
	var errs []error
	for i, e := range m.Entries {
		if err := entry(e); err != nil {
			errs = append(errs, fmt.Errorf("manifest entry %d (%s %q): %w", i, e.Kind, e.Path, err))
		}
	}
	for k, v := range m.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("manifest env: invalid name %q", k))
		}
		if strings.IndexByte(v, 0) >= 0 {
			errs = append(errs, fmt.Errorf("manifest env %s: value contains a NUL byte", k))
		}
	}
	return errors.Join(errs...)
}

// EphemeralPaths returns the clean paths of the manifest's ephemeral
// entries, which snapshots leave out. Entries with invalid paths are
// skipped; Validate reports them.
func (m Manifest) EphemeralPaths() []string {
	var out []string
	for _, e := range m.Entries {
		if !e.Ephemeral {
			continue
		}
		if p, err := CleanPath(e.Path); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// check checks what of e needs no host, and returns its clean path.
func (e Entry) check() (string, error) {
	clean, err := CleanPath(e.Path)
	if err != nil {
		return "", err
	}
	if e.Mode&^0o777 != 0 {
		return "", fmt.Errorf("mode %#o has bits beyond the permission bits 0777", e.Mode)
	}
	switch e.Kind {
	case EntryFile, EntryDir, EntryLocalFile, EntryLocalDir, EntryGitRepo:
	default:
		return "", fmt.Errorf("unknown kind %q", e.Kind)
	}
	isHost := e.Kind == EntryLocalFile || e.Kind == EntryLocalDir || e.Kind == EntryGitRepo
	isGit := e.Kind == EntryGitRepo
	var errs []error
	notFor := func(field string) {
		errs = append(errs, fmt.Errorf("%s does not apply to a %s entry", field, e.Kind))
	}
	if e.Content != "" && e.Kind != EntryFile {
		notFor("content")
	}
	if e.Ref != "" && !isGit {
		notFor("ref")
	}
	if e.Depth != 0 && !isGit {
		notFor("depth")
	}
	switch {
	case isHost && e.Source == "":
		errs = append(errs, fmt.Errorf("a %s entry needs a source", e.Kind))
	case !isHost && e.Source != "":
		notFor("source")
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if clean == "." && (e.Kind == EntryFile || e.Kind == EntryLocalFile) {
		return "", fmt.Errorf("%w: a %s entry cannot be the workspace root", ErrPathEscape, e.Kind)
	}
	if e.Kind == EntryGitRepo && e.Depth < 0 {
		return "", fmt.Errorf("depth %d is negative", e.Depth)
	}
	return clean, nil
}

// validate checks e, its host source against p included.
func (e Entry) validate(p Policy) error {
	if _, err := e.check(); err != nil {
		return err
	}
	switch e.Kind {
	case EntryLocalFile:
		src, err := p.allows(e.Source)
		if err != nil {
			return err
		}
		return wantType(src, false)
	case EntryLocalDir:
		src, err := p.allows(e.Source)
		if err != nil {
			return err
		}
		if err := wantType(src, true); err != nil {
			return err
		}
		return checkTreeLinks(src)
	case EntryGitRepo:
		local, remote, err := gitSource(e.Source)
		if err != nil {
			return err
		}
		if remote != "" {
			return nil
		}
		src, err := p.allows(local)
		if err != nil {
			return err
		}
		return wantType(src, true)
	}
	return nil
}

// wantType checks that the resolved host path is a directory (dir) or a
// regular file.
func wantType(resolved string, dir bool) error {
	fi, err := os.Stat(resolved)
	if err != nil {
		return err
	}
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("source %q is not a directory", resolved)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("source %q is not a regular file", resolved)
	}
	return nil
}

// checkTreeLinks walks the host directory dir and rejects, with
// ErrPathEscape, a symlink that would point outside it once copied.
func checkTreeLinks(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := root.Readlink(p)
		if err != nil {
			return err
		}
		return CheckLink(p, target)
	})
}

// CheckLink rejects, with an error wrapping ErrPathEscape, a symlink at
// the tree-relative path link whose target is absolute or leads out of
// the tree, judged lexically: such a link would point at the host, or at
// nothing, once the tree is copied. Validate checks a local_dir's links
// with it, and host.Materialize those of a git tree.
func CheckLink(link, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("%w: symlink %q has an invalid target", ErrPathEscape, link)
	}
	if path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %q points to the absolute path %q", ErrPathEscape, link, target)
	}
	resolved := path.Join(path.Dir(link), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("%w: symlink %q points to %q, outside its tree", ErrPathEscape, link, target)
	}
	return nil
}

// scpLike matches git's scp-like syntax, [user@]host:path, and not
// git's "transport::address" syntax, which go-git does not speak anyway.
var scpLike = regexp.MustCompile(`^([A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+:[^:]`)

// GitSource classifies the source of a git repository as git_repo
// entries take it: a local path (returned in local: an absolute path, or
// the path of a file:// URL), which a Policy governs, or a remote URL
// (returned in remote: http, https, ssh, git, or git's scp-like
// [user@]host:path). Anything else is an error.
func GitSource(source string) (local, remote string, err error) { return gitSource(source) }

// gitSource classifies a git_repo Source as a local path (returned in
// local) or a remote URL (returned in remote). A file:// URL is a local
// path, so it is subject to the Policy like any other.
func gitSource(source string) (local, remote string, err error) {
	if strings.IndexByte(source, 0) >= 0 {
		return "", "", fmt.Errorf("source contains a NUL byte")
	}
	if rest, ok := strings.CutPrefix(source, "file://"); ok {
		u, err := url.Parse(source)
		if err != nil || (u.Host != "" && u.Host != "localhost") {
			return "", "", fmt.Errorf("source %q is not a local file URL", source)
		}
		if rest == "" || u.Path == "" {
			return "", "", fmt.Errorf("source %q has no path", source)
		}
		return u.Path, "", nil
	}
	if filepath.IsAbs(source) {
		return source, "", nil
	}
	if scheme, _, ok := strings.Cut(source, "://"); ok {
		switch scheme {
		case "http", "https", "ssh", "git":
			return "", source, nil
		}
		return "", "", fmt.Errorf("source %q: unsupported URL scheme %q", source, scheme)
	}
	// scp-like syntax: [user@]host:path.
	if scpLike.MatchString(source) {
		return "", source, nil
	}
	return "", "", fmt.Errorf("%w: %q is neither an absolute host path nor a URL", ErrSourceNotAllowed, source)
}
