// Package sandboxtest is the conformance suite every sandbox backend
// passes: Run exercises a sandbox.Client through the sandbox.Session
// contract, with subtests for manifests, escapes, commands, files,
// snapshots, state and stop.
//
// A backend's test calls it with a client whose Policy allows a directory
// that the test also passes as Options.SourceRoot:
//
//	func TestConformance(t *testing.T) {
//		src := t.TempDir()
//		c, err := local.New(local.Config{Root: t.TempDir(), Policy: sandbox.Policy{AllowedRoots: []string{src}}})
//		...
//		sandboxtest.Run(t, c, sandboxtest.Options{SourceRoot: src})
//	}
//
// The commands the suite runs need only a POSIX sh with echo, printf, cat,
// ls, pwd, env, sleep, ln, mkdir, readlink, dd, chmod and wc, so a busybox
// image passes it.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Options configure Run.
type Options struct {
	// SourceRoot is a host directory that the client's Policy lists in
	// AllowedRoots. The suite makes its local_file, local_dir and git_repo
	// sources there. Empty skips the subtests that need host sources.
	SourceRoot string
	// SandboxOptions are the options of every session the suite creates
	// (an image for a container backend, say).
	SandboxOptions sandbox.Options
	// ExtraEnv lists variables, beyond the manifest's, that the backend's
	// commands may see and that are not host leaks: the suite always
	// allows PATH, HOME, PWD, OLDPWD, SHLVL and _ (which shells set
	// themselves) and HOSTNAME (which container runtimes set).
	ExtraEnv []string
}

// Run runs the conformance suite against c. Each subtest creates its own
// sessions and stops them.
func Run(t *testing.T, c sandbox.Client, opts Options) {
	s := &suite{c: c, opts: opts}
	t.Run("Manifest", s.testManifest)
	t.Run("ManifestEscapes", s.testManifestEscapes)
	t.Run("Exec", s.testExec)
	t.Run("Env", s.testEnv)
	t.Run("Files", s.testFiles)
	t.Run("FileEscapes", s.testFileEscapes)
	t.Run("Snapshot", s.testSnapshot)
	t.Run("Hostile", s.testHostile)
	t.Run("StateResume", s.testStateResume)
	t.Run("Stop", s.testStop)
	t.Run("CreateAgain", s.testCreateAgain)
	t.Run("Concurrent", s.testConcurrent)
}

type suite struct {
	c    sandbox.Client
	opts Options
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newID returns a session id unique to this run.
func newID(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "sbt-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

// create creates a session from m and stops it when the test ends.
func (s *suite) create(t *testing.T, m sandbox.Manifest) sandbox.Session {
	t.Helper()
	sess, err := s.c.Create(ctxFor(t), sandbox.Spec{ID: newID(t), Manifest: m, Options: s.opts.SandboxOptions})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sess.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sess
}

// run runs cmd and fails the test unless it exits 0; it returns the
// output.
func run(t *testing.T, sess sandbox.Session, cmd string) string {
	t.Helper()
	res, err := sess.Exec(ctxFor(t), sandbox.ExecRequest{Cmd: cmd, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("Exec(%q): exit %d, output:\n%s", cmd, res.ExitCode, res.Output)
	}
	return res.Output
}

func (s *suite) needSources(t *testing.T) {
	if s.opts.SourceRoot == "" {
		t.Skip("no Options.SourceRoot")
	}
}

// sources makes the host sources the manifest subtests copy from, in a
// fresh directory under SourceRoot, and returns that directory.
func (s *suite) sources(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(s.opts.SourceRoot, "src-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	write := func(name, content string, mode fs.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("one.txt", "one\n", 0o640)
	write("tree/a.txt", "a\n", 0o644)
	write("tree/sub/run.sh", "#!/bin/sh\necho tree-ran\n", 0o755)
	if err := os.Symlink("sub/run.sh", filepath.Join(dir, "tree/link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gitRepo makes a repository at dir with go-git: commit "v1" (tagged v1)
// holding version.txt = "1\n" and a link, then commit "v2" on main with
// version.txt = "2\n". It returns the hash of the first commit.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "sandboxtest", Email: "sandboxtest@example.com", When: time.Unix(1700000000, 0)}
	commit := func(version string) string {
		if err := os.WriteFile(filepath.Join(dir, "version.txt"), []byte(version+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add("version.txt"); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit("v"+version, &git.CommitOptions{Author: sig, Committer: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.sh"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("version.txt", filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tool.sh", "current"} {
		if _, err := wt.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	first := commit("1")
	if _, err := repo.CreateTag("v1", plumbing.NewHash(first), nil); err != nil {
		t.Fatal(err)
	}
	commit("2")
	// An uncommitted change, which must not be copied.
	if err := os.WriteFile(filepath.Join(dir, "version.txt"), []byte("dirty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return first
}

func (s *suite) testManifest(t *testing.T) {
	s.needSources(t)
	src := s.sources(t)
	repoDir := filepath.Join(src, "repo")
	first := gitRepo(t, repoDir)
	sess := s.create(t, sandbox.Manifest{
		Entries: []sandbox.Entry{
			{Kind: sandbox.EntryFile, Path: "hello.txt", Content: "hello\n"},
			{Kind: sandbox.EntryFile, Path: "bin/run.sh", Content: "#!/bin/sh\necho ran\n", Mode: 0o755},
			{Kind: sandbox.EntryFile, Path: "./secret//key", Content: "k", Mode: 0o600},
			{Kind: sandbox.EntryDir, Path: "empty"},
			{Kind: sandbox.EntryLocalFile, Path: "copied/one.txt", Source: filepath.Join(src, "one.txt")},
			{Kind: sandbox.EntryLocalDir, Path: "tree", Source: filepath.Join(src, "tree")},
			{Kind: sandbox.EntryGitRepo, Path: "repo-v1", Source: repoDir, Ref: "v1"},
			{Kind: sandbox.EntryGitRepo, Path: "repo-head", Source: "file://" + repoDir, Depth: 1},
			{Kind: sandbox.EntryGitRepo, Path: "repo-hash", Source: repoDir, Ref: first[:10]},
		},
		Env: map[string]string{"GREETING": "hi"},
	})
	ctx := ctxFor(t)
	for p, want := range map[string]string{
		"hello.txt":             "hello\n",
		"secret/key":            "k",
		"copied/one.txt":        "one\n",
		"tree/a.txt":            "a\n",
		"repo-v1/version.txt":   "1\n",
		"repo-v1/current":       "1\n",
		"repo-head/version.txt": "2\n",
		"repo-hash/version.txt": "1\n",
		"tree/sub/run.sh":       "#!/bin/sh\necho tree-ran\n",
		"repo-head/tool.sh":     "#!/bin/sh\necho tool\n",
		"bin/run.sh":            "#!/bin/sh\necho ran\n",
	} {
		got, err := sess.ReadFile(ctx, p)
		if err != nil {
			t.Errorf("ReadFile(%q): %v", p, err)
			continue
		}
		if string(got) != want {
			t.Errorf("ReadFile(%q) = %q, want %q", p, got, want)
		}
	}
	modes := map[string]fs.FileMode{
		"hello.txt": 0o644, "bin/run.sh": 0o755, "secret/key": 0o600, "copied/one.txt": 0o640,
		"tree/sub/run.sh": 0o755, "repo-head/tool.sh": 0o755, "repo-head/version.txt": 0o644,
	}
	for p, want := range modes {
		if got := modeOf(t, sess, p); got.Perm() != want {
			t.Errorf("mode of %q = %v, want %v", p, got.Perm(), want)
		}
	}
	if m := modeOf(t, sess, "empty"); !m.IsDir() {
		t.Errorf("empty: mode %v, want a directory", m)
	}
	if m := modeOf(t, sess, "tree/link"); m&fs.ModeSymlink == 0 {
		t.Errorf("tree/link: mode %v, want a symlink", m)
	}
	if _, err := sess.List(ctx, "repo-head/.git"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List(repo-head/.git) = %v, want fs.ErrNotExist: the work tree is copied without .git", err)
	}
	out := run(t, sess, "./bin/run.sh && tree/link && sh repo-v1/tool.sh && readlink repo-v1/current && echo $GREETING")
	if want := "ran\ntree-ran\ntool\nversion.txt\nhi\n"; out != want {
		t.Errorf("commands over the manifest printed %q, want %q", out, want)
	}
}

// modeOf returns the mode List reports for the workspace path p.
func modeOf(t *testing.T, sess sandbox.Session, p string) fs.FileMode {
	t.Helper()
	infos, err := sess.List(ctxFor(t), path.Dir(p))
	if err != nil {
		t.Fatalf("List(%q): %v", path.Dir(p), err)
	}
	for _, fi := range infos {
		if fi.Name == path.Base(p) {
			return fi.Mode
		}
	}
	t.Fatalf("List(%q) has no %q", path.Dir(p), path.Base(p))
	return 0
}

func (s *suite) testManifestEscapes(t *testing.T) {
	outside := t.TempDir() // Not under SourceRoot.
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := ""
	if s.opts.SourceRoot != "" {
		src = s.sources(t)
		// A source tree with a symlink to the host directory outside.
		if err := os.MkdirAll(filepath.Join(src, "evil"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(src, "evil", "out")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../..", filepath.Join(src, "evil", "up")); err != nil {
			t.Fatal(err)
		}
		// A source inside SourceRoot that resolves outside it.
		if err := os.Symlink(secret, filepath.Join(src, "sneaky")); err != nil {
			t.Fatal(err)
		}
	}
	file := func(p string) sandbox.Entry { return sandbox.Entry{Kind: sandbox.EntryFile, Path: p, Content: "pwned"} }
	cases := []struct {
		name    string
		entries []sandbox.Entry
		want    error
		sources bool
	}{
		{name: "dotdot", entries: []sandbox.Entry{file("ok.txt"), file("../pwned")}, want: sandbox.ErrPathEscape},
		{name: "dotdot-inner", entries: []sandbox.Entry{file("a/../../pwned")}, want: sandbox.ErrPathEscape},
		{name: "dotdot-cancelling", entries: []sandbox.Entry{file("a/../b")}, want: sandbox.ErrPathEscape},
		{name: "absolute", entries: []sandbox.Entry{file(filepath.Join(outside, "pwned"))}, want: sandbox.ErrPathEscape},
		{name: "dir-absolute", entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "/tmp/pwned-dir"}}, want: sandbox.ErrPathEscape},
		{name: "empty-path", entries: []sandbox.Entry{file("")}, want: sandbox.ErrPathEscape},
		{name: "local-file-outside-roots", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalFile, Path: "s", Source: secret}}, want: sandbox.ErrSourceNotAllowed},
		{name: "local-dir-outside-roots", entries: []sandbox.Entry{{Kind: sandbox.EntryLocalDir, Path: "s", Source: outside}}, want: sandbox.ErrSourceNotAllowed},
		{name: "git-outside-roots", entries: []sandbox.Entry{{Kind: sandbox.EntryGitRepo, Path: "s", Source: "file://" + outside}}, want: sandbox.ErrSourceNotAllowed},
		{name: "source-symlink-out", sources: true, entries: []sandbox.Entry{{Kind: sandbox.EntryLocalFile, Path: "s", Source: filepath.Join(src, "sneaky")}}, want: sandbox.ErrSourceNotAllowed},
		{
			name: "symlink-out-then-through", sources: true,
			entries: []sandbox.Entry{
				{Kind: sandbox.EntryLocalDir, Path: "evil", Source: filepath.Join(src, "evil")},
				file("evil/out/pwned"),
				file("evil/up/pwned"),
			},
			want: sandbox.ErrPathEscape,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sources {
				s.needSources(t)
			}
			spec := sandbox.Spec{ID: newID(t), Manifest: sandbox.Manifest{Entries: tc.entries}, Options: s.opts.SandboxOptions}
			sess, err := s.c.Create(ctxFor(t), spec)
			if err == nil {
				sess.Stop(context.Background())
				t.Fatalf("Create succeeded, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Create: %v, want %v", err, tc.want)
			}
			t.Logf("rejected: %v", err)
			assertOnly(t, outside, "secret.txt")
			// Nothing of the failed session is left: its ID is free.
			ok, err := s.c.Create(ctxFor(t), sandbox.Spec{ID: spec.ID, Options: s.opts.SandboxOptions})
			if err != nil {
				t.Fatalf("Create with the rejected session's ID: %v", err)
			}
			if err := ok.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// assertOnly fails unless the host directory dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("host directory %s holds %q, want %q: something was written outside the workspace", dir, got, names)
	}
}

func (s *suite) testExec(t *testing.T) {
	sess := s.create(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "sub/dir/marker", Content: "m"},
	}})
	ctx := ctxFor(t)
	exec := func(req sandbox.ExecRequest) sandbox.ExecResult {
		t.Helper()
		if req.Timeout == 0 {
			req.Timeout = 30 * time.Second
		}
		res, err := sess.Exec(ctx, req)
		if err != nil {
			t.Fatalf("Exec(%q): %v", req.Cmd, err)
		}
		return res
	}
	t.Run("ExitCodes", func(t *testing.T) {
		for cmd, want := range map[string]int{"true": 0, "false": 1, "exit 3": 3, "exit 255": 255, "nosuchcommand-xyz": 127} {
			if res := exec(sandbox.ExecRequest{Cmd: cmd}); res.ExitCode != want || res.TimedOut {
				t.Errorf("%q: exit %d (timed out %v), want %d", cmd, res.ExitCode, res.TimedOut, want)
			}
		}
	})
	t.Run("Output", func(t *testing.T) {
		res := exec(sandbox.ExecRequest{Cmd: "echo out; echo err >&2; printf 'no newline'"})
		if res.Output != "out\nerr\nno newline" || res.Truncated || res.OriginalBytes != len(res.Output) {
			t.Errorf("output %q (truncated %v, %d bytes), want stdout and stderr interleaved", res.Output, res.Truncated, res.OriginalBytes)
		}
		if res.Duration <= 0 {
			t.Errorf("duration %v", res.Duration)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		start := time.Now()
		res := exec(sandbox.ExecRequest{Cmd: "echo before; sleep 30; echo after", Timeout: 500 * time.Millisecond})
		if !res.TimedOut || res.ExitCode != -1 {
			t.Errorf("timed out %v, exit %d; want true, -1", res.TimedOut, res.ExitCode)
		}
		if !strings.Contains(res.Output, "before") || strings.Contains(res.Output, "after") {
			t.Errorf("output %q: want what came before the timeout", res.Output)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("a 500ms timeout took %v", d)
		}
		// The session still works.
		if res := exec(sandbox.ExecRequest{Cmd: "echo alive"}); res.Output != "alive\n" {
			t.Errorf("after a timeout: %q", res.Output)
		}
	})
	t.Run("BackgroundDoesNotBlock", func(t *testing.T) {
		start := time.Now()
		res := exec(sandbox.ExecRequest{Cmd: "sleep 30 & echo started", Timeout: 20 * time.Second})
		if res.ExitCode != 0 || res.Output != "started\n" || res.TimedOut {
			t.Errorf("exit %d, output %q, timed out %v", res.ExitCode, res.Output, res.TimedOut)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("a command that left a background process took %v", d)
		}
	})
	t.Run("OutputCap", func(t *testing.T) {
		// 3000 lines "line0".."line2999".
		all := seqLines(3000)
		res := exec(sandbox.ExecRequest{
			Cmd:            `i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done`,
			MaxOutputBytes: 1000,
		})
		if !res.Truncated || res.OriginalBytes != len(all) {
			t.Fatalf("truncated %v, original %d bytes; want true, %d", res.Truncated, res.OriginalBytes, len(all))
		}
		if !strings.HasPrefix(res.Output, "line0\nline1\n") || !strings.HasSuffix(res.Output, "line2998\nline2999\n") {
			t.Errorf("output does not keep head and tail:\n%s", res.Output)
		}
		if !strings.Contains(res.Output, "bytes truncated]") || len(res.Output) > 1100 {
			t.Errorf("output (%d bytes) lacks the truncation marker or exceeds the cap:\n%s", len(res.Output), res.Output)
		}
		want, _ := sandbox.CapOutput(all, 1000)
		if res.Output != want {
			t.Errorf("output differs from sandbox.CapOutput's:\n%s\nwant\n%s", res.Output, want)
		}
	})
	t.Run("Workdir", func(t *testing.T) {
		res := exec(sandbox.ExecRequest{Cmd: "pwd; ls", Workdir: "sub/dir"})
		if res.ExitCode != 0 || !strings.HasSuffix(strings.SplitN(res.Output, "\n", 2)[0], "/sub/dir") || !strings.Contains(res.Output, "marker") {
			t.Errorf("workdir sub/dir: exit %d, output %q", res.ExitCode, res.Output)
		}
		res = exec(sandbox.ExecRequest{Cmd: "cat dir/marker", Workdir: "./sub/"})
		if res.Output != "m" {
			t.Errorf("workdir ./sub/: output %q", res.Output)
		}
		for _, wd := range []string{"../", "/", "sub/../..", "missing", "sub/dir/marker"} {
			if _, err := sess.Exec(ctx, sandbox.ExecRequest{Cmd: "true", Workdir: wd}); err == nil {
				t.Errorf("workdir %q: no error", wd)
			}
		}
		if _, err := sess.Exec(ctx, sandbox.ExecRequest{Cmd: "true", Workdir: "../"}); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("workdir ../: %v, want ErrPathEscape", err)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		_, err := sess.Exec(cctx, sandbox.ExecRequest{Cmd: "sleep 30", Timeout: time.Minute})
		if err == nil {
			t.Errorf("a cancelled Exec returned no error")
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cancel took %v", d)
		}
	})
}

// seqLines is the output of the OutputCap command.
func seqLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "line%d\n", i)
	}
	return b.Bytes()
}

// allowedEnv are the variables a command may see beyond its manifest's.
var allowedEnv = []string{"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME"}

func (s *suite) testEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-host-secret-must-not-leak")
	t.Setenv("TROUPE_SANDBOXTEST_HOST", "host-only")
	env := map[string]string{"TROUPE_VAR": "v1", "WITH_SPACE": "a b  c", "EMPTY": ""}
	sess := s.create(t, sandbox.Manifest{Env: env})
	out := run(t, sess, "env")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	for k, v := range env {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %q (set %v), want %q", k, g, ok, v)
		}
	}
	allowed := append(slices.Clone(allowedEnv), s.opts.ExtraEnv...)
	var extra []string
	for k := range got {
		if _, ok := env[k]; !ok && !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("commands see variables beyond the manifest's: %q\n%s", extra, out)
	}
	if strings.Contains(out, "sk-host-secret") || strings.Contains(out, "host-only") {
		t.Errorf("the host environment leaked:\n%s", out)
	}
	if got["PATH"] == "" || got["HOME"] == "" {
		t.Errorf("PATH %q, HOME %q: want both set", got["PATH"], got["HOME"])
	}
	// A manifest PATH or HOME wins.
	sess = s.create(t, sandbox.Manifest{Env: map[string]string{"HOME": "/custom-home", "PATH": "/usr/bin:/bin"}})
	if out := run(t, sess, `echo "$HOME $PATH"`); out != "/custom-home /usr/bin:/bin\n" {
		t.Errorf("manifest HOME and PATH: %q", out)
	}
	// A request's Env adds to the manifest's and wins over it, for that
	// command only.
	sess = s.create(t, sandbox.Manifest{Env: map[string]string{"TROUPE_VAR": "manifest", "KEPT": "k"}})
	res, err := sess.Exec(ctxFor(t), sandbox.ExecRequest{Cmd: `echo "$TROUPE_VAR $KEPT $TROUPE_IDEMPOTENCY_KEY"`,
		Env: map[string]string{"TROUPE_VAR": "request", "TROUPE_IDEMPOTENCY_KEY": "troupe-0f"}})
	if err != nil || res.Output != "request k troupe-0f\n" {
		t.Errorf("a request's Env: %q, %v; want %q", res.Output, err, "request k troupe-0f\n")
	}
	if out := run(t, sess, `echo "$TROUPE_VAR ${TROUPE_IDEMPOTENCY_KEY-unset}"`); out != "manifest unset\n" {
		t.Errorf("the next command sees %q, want the manifest's environment alone", out)
	}
	for _, bad := range []string{"", "A=B", "-v"} {
		if _, err := sess.Exec(ctxFor(t), sandbox.ExecRequest{Cmd: "true", Env: map[string]string{bad: "x"}}); err == nil {
			t.Errorf("a request's Env with the name %q ran", bad)
		}
	}
}

func (s *suite) testFiles(t *testing.T) {
	sess := s.create(t, sandbox.Manifest{})
	ctx := ctxFor(t)
	if err := sess.WriteFile(ctx, "a/b/c.txt", []byte("content"), 0o600); err != nil {
		t.Fatalf("WriteFile with missing parents: %v", err)
	}
	if got := run(t, sess, "cat a/b/c.txt"); got != "content" {
		t.Errorf("a command reads %q, want the written content", got)
	}
	run(t, sess, "printf 'from command' > cmd.txt; mkdir -p d/e; ln -s a/b/c.txt link")
	if got, err := sess.ReadFile(ctx, "cmd.txt"); err != nil || string(got) != "from command" {
		t.Errorf("ReadFile(cmd.txt) = %q, %v", got, err)
	}
	if got, err := sess.ReadFile(ctx, "link"); err != nil || string(got) != "content" {
		t.Errorf("ReadFile through an inside symlink = %q, %v", got, err)
	}
	if err := sess.WriteFile(ctx, "a/b/c.txt", []byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if got := run(t, sess, "cat a/b/c.txt"); got != "new" {
		t.Errorf("after overwrite: %q", got)
	}
	if m := modeOf(t, sess, "a/b/c.txt"); m.Perm() != 0o644 {
		t.Errorf("mode after WriteFile with mode 0: %v, want 0644", m)
	}
	infos, err := sess.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name)
		switch fi.Name {
		case "a", "d":
			if !fi.IsDir || !fi.Mode.IsDir() {
				t.Errorf("%s: %+v, want a directory", fi.Name, fi)
			}
		case "cmd.txt":
			if fi.IsDir || fi.Size != int64(len("from command")) {
				t.Errorf("cmd.txt: %+v", fi)
			}
		case "link":
			if fi.Mode&fs.ModeSymlink == 0 {
				t.Errorf("link: %+v, want a symlink", fi)
			}
		}
	}
	if want := []string{"a", "cmd.txt", "d", "link"}; !slices.Equal(names, want) {
		t.Errorf("List(\"\") = %q, want %q", names, want)
	}
	if _, err := sess.ReadFile(ctx, "missing.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if err := sess.Remove(ctx, "d"); err == nil {
		t.Errorf("Remove of a non-empty directory succeeded")
	}
	for _, p := range []string{"d/e", "d", "cmd.txt", "link"} {
		if err := sess.Remove(ctx, p); err != nil {
			t.Errorf("Remove(%q): %v", p, err)
		}
	}
	if got, err := sess.ReadFile(ctx, "a/b/c.txt"); err != nil || string(got) != "new" {
		t.Errorf("removing a symlink touched its target: %q, %v", got, err)
	}
	if got := run(t, sess, "ls"); got != "a\n" {
		t.Errorf("after removes, ls = %q", got)
	}
	if err := sess.Remove(ctx, "."); err == nil {
		t.Errorf("Remove(\".\") succeeded")
	}
}

func (s *suite) testFileEscapes(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "secret.txt"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sess := s.create(t, sandbox.Manifest{})
	ctx := ctxFor(t)
	// Commands plant symlinks to the host directory, to the host file,
	// and to the root, by absolute path and by "..".
	run(t, sess, fmt.Sprintf("ln -s %s hostdir; ln -s %s hostfile; ln -s / rootlink; ln -s ../../../../../../../.. up; mkdir inner; ln -s ../../../../../../../../.. inner/up",
		shellQuote(host), shellQuote(filepath.Join(host, "secret.txt"))))
	paths := []string{
		"../x", "/x", filepath.Join(host, "pwned"), "a/../../x", "",
		"hostdir/pwned", "hostfile", "rootlink/tmp/pwned", "up/pwned", "inner/up/pwned",
	}
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			if err := sess.WriteFile(ctx, p, []byte("pwned"), 0o644); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
			}
			if b, err := sess.ReadFile(ctx, p); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("ReadFile(%q) = %q, %v; want ErrPathEscape", p, b, err)
			}
			if p != "hostfile" && p != "" { // Remove of the link itself is fine.
				if err := sess.Remove(ctx, p); !errors.Is(err, sandbox.ErrPathEscape) && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("Remove(%q) = %v, want ErrPathEscape", p, err)
				}
			}
		})
	}
	for _, p := range []string{"hostdir", "rootlink", "up", "../", "/etc"} {
		if infos, err := sess.List(ctx, p); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("List(%q) = %d entries, %v; want ErrPathEscape", p, len(infos), err)
		}
	}
	assertOnly(t, host, "secret.txt")
	if b, _ := os.ReadFile(filepath.Join(host, "secret.txt")); string(b) != "host secret" {
		t.Errorf("the host file changed: %q", b)
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tree describes a workspace, through the Session API, for comparisons.
func tree(t *testing.T, sess sandbox.Session, skip ...string) map[string]string {
	t.Helper()
	ctx := ctxFor(t)
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		infos, err := sess.List(ctx, dir)
		if err != nil {
			t.Fatalf("List(%q): %v", dir, err)
		}
		for _, fi := range infos {
			p := path.Join(dir, fi.Name)
			if slices.Contains(skip, p) {
				continue
			}
			switch {
			case fi.Mode&fs.ModeSymlink != 0:
				out[p] = "symlink -> " + run(t, sess, "readlink "+shellQuote(p))
			case fi.IsDir:
				out[p] = fmt.Sprintf("dir %v", fi.Mode.Perm())
				walk(p)
			default:
				b, err := sess.ReadFile(ctx, p)
				if err != nil {
					t.Fatalf("ReadFile(%q): %v", p, err)
				}
				out[p] = fmt.Sprintf("file %v %d %x", fi.Mode.Perm(), fi.Size, b)
			}
		}
	}
	walk(".")
	return out
}

func (s *suite) testSnapshot(t *testing.T) {
	ctx := ctxFor(t)
	a := s.create(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "keep.txt", Content: "kept\n"},
		{Kind: sandbox.EntryFile, Path: "eph.txt", Content: "ephemeral\n", Ephemeral: true},
		{Kind: sandbox.EntryDir, Path: "cache", Ephemeral: true},
		{Kind: sandbox.EntryFile, Path: "cache/big", Content: "cached\n"},
	}})
	run(t, a, `mkdir -p src/pkg empty ro && printf '#!/bin/sh\necho hi\n' > src/run.sh && chmod 755 src/run.sh &&
printf 'private' > src/pkg/secret && chmod 600 src/pkg/secret &&
dd if=/dev/urandom of=blob.bin bs=1024 count=300 2>/dev/null &&
ln -s src/run.sh rel-link && ln -s /usr/bin/env abs-link && printf x > ro/file && chmod 555 ro`)
	if err := a.WriteFile(ctx, "bytes.bin", []byte{0, 1, 2, 0xff, '\n', 0}, 0o640); err != nil {
		t.Fatal(err)
	}
	want := tree(t, a, "eph.txt", "cache")

	var snap bytes.Buffer
	if err := a.Snapshot(ctx, &snap); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var again bytes.Buffer
	if err := a.Snapshot(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Bytes(), again.Bytes()) {
		t.Errorf("two snapshots of the same workspace differ")
	}

	b := s.create(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "stale.txt", Content: "goes away\n"},
		{Kind: sandbox.EntryFile, Path: "src/stale.txt", Content: "goes away\n"},
		{Kind: sandbox.EntryFile, Path: "cache/mine", Content: "b's cache\n", Ephemeral: true},
	}})
	if err := b.Restore(ctx, bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatalf("Restore into a fresh session: %v", err)
	}
	got := tree(t, b, "cache")
	if !mapsEqual(t, got, want) {
		t.Errorf("restored workspace differs from the original")
	}
	if _, ok := got["eph.txt"]; ok {
		t.Errorf("an ephemeral entry was in the snapshot")
	}
	if c, err := b.ReadFile(ctx, "cache/mine"); err != nil || string(c) != "b's cache\n" {
		t.Errorf("the restored session's own ephemeral entry: %q, %v; want it kept", c, err)
	}
	if _, err := b.ReadFile(ctx, "cache/big"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cache/big (ephemeral in the source) was restored: %v", err)
	}
	if out := run(t, b, "./src/run.sh && ./rel-link"); out != "hi\nhi\n" {
		t.Errorf("restored scripts print %q", out)
	}

	// Restore rolls a session back, and takes a plain io.Reader.
	run(t, a, "echo later > later.txt; rm keep.txt")
	if err := a.Restore(ctx, struct{ *bytes.Reader }{bytes.NewReader(snap.Bytes())}); err != nil {
		t.Fatalf("Restore into the same session: %v", err)
	}
	if got := tree(t, a, "eph.txt", "cache"); !mapsEqual(t, got, want) {
		t.Errorf("rolled-back workspace differs from the snapshot")
	}
	if c, err := a.ReadFile(ctx, "eph.txt"); err != nil || string(c) != "ephemeral\n" {
		t.Errorf("ephemeral eph.txt after a rollback: %q, %v; want it kept", c, err)
	}

	// A corrupt archive fails and leaves the workspace as it was.
	if err := b.Restore(ctx, bytes.NewReader([]byte("not a snapshot"))); err == nil {
		t.Errorf("Restore of garbage succeeded")
	}
	if got := tree(t, b, "cache"); !mapsEqual(t, got, want) {
		t.Errorf("a failed restore changed the workspace")
	}
}

func mapsEqual(t *testing.T, got, want map[string]string) bool {
	t.Helper()
	ok := true
	for k, w := range want {
		if g, found := got[k]; !found || g != w {
			if len(g) > 120 {
				g = g[:120] + "…"
			}
			if len(w) > 120 {
				w = w[:120] + "…"
			}
			t.Errorf("  %s: got %q, want %q", k, g, w)
			ok = false
		}
	}
	for k := range got {
		if _, found := want[k]; !found {
			t.Errorf("  %s: unexpected %q", k, got[k])
			ok = false
		}
	}
	return ok
}

func (s *suite) testStateResume(t *testing.T) {
	ctx := ctxFor(t)
	sess := s.create(t, sandbox.Manifest{
		Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "f.txt", Content: "persisted"}, {Kind: sandbox.EntryDir, Path: "tmp", Ephemeral: true}},
		Env:     map[string]string{"RESUMED_VAR": "yes"},
	})
	st := sess.State()
	if st.Backend != s.c.Backend() || st.ID == "" || st.Host == "" || st.Workspace == "" {
		t.Errorf("State() = %+v: want backend %q, an ID, a host and a workspace", st, s.c.Backend())
	}
	if st.Env["RESUMED_VAR"] != "yes" || !slices.Contains(st.Ephemeral, "tmp") {
		t.Errorf("State() env %v, ephemeral %v", st.Env, st.Ephemeral)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var decoded sandbox.State
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	resumed, err := s.c.Resume(ctx, decoded)
	if err != nil {
		t.Fatalf("Resume(%s): %v", b, err)
	}
	if err := resumed.Alive(ctx); err != nil {
		t.Errorf("Alive after Resume: %v", err)
	}
	if out := run(t, resumed, `cat f.txt; echo " $RESUMED_VAR"`); out != "persisted yes\n" {
		t.Errorf("resumed session: %q", out)
	}
	if got, err := resumed.ReadFile(ctx, "f.txt"); err != nil || string(got) != "persisted" {
		t.Errorf("resumed ReadFile: %q, %v", got, err)
	}
	// A state that names an unknown session is gone.
	unknown := decoded
	unknown.ID = newID(t)
	if _, err := s.c.Resume(ctx, unknown); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume of an unknown session: %v, want ErrGone", err)
	}
	// A state whose workspace was forged is refused, and Stop of the real
	// session still works.
	forged := decoded
	forged.Workspace = t.TempDir()
	if sess, err := s.c.Resume(ctx, forged); err == nil {
		sess.Stop(ctx)
		t.Errorf("Resume of a forged workspace succeeded")
	}
}

func (s *suite) testStop(t *testing.T) {
	ctx := ctxFor(t)
	sess, err := s.c.Create(ctx, sandbox.Spec{ID: newID(t), Options: s.opts.SandboxOptions,
		Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "f", Content: "x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	st := sess.State()
	// A command still running when Stop comes is ended.
	done := make(chan error, 1)
	go func() {
		_, err := sess.Exec(ctx, sandbox.ExecRequest{Cmd: "sleep 30", Timeout: time.Minute})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := sess.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("a running command outlived Stop")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if err := sess.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v, want nil (idempotent)", err)
	}
	if err := sess.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Alive after Stop: %v, want ErrGone", err)
	}
	if _, err := sess.Exec(ctx, sandbox.ExecRequest{Cmd: "true"}); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Exec after Stop: %v, want ErrGone", err)
	}
	if _, err := sess.ReadFile(ctx, "f"); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("ReadFile after Stop: %v, want ErrGone", err)
	}
	if _, err := s.c.Resume(ctx, st); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Resume after Stop: %v, want ErrGone", err)
	}
	// A resumed session stops too.
	other := s.create(t, sandbox.Manifest{})
	resumed, err := s.c.Resume(ctx, other.State())
	if err != nil {
		t.Fatal(err)
	}
	if err := resumed.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Alive(ctx); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Alive after a resumed copy stopped: %v, want ErrGone", err)
	}
}

// testCreateAgain: a Create for the ID of a session that exists (what a
// Create whose worker was killed leaves, retried) replaces it with a
// fresh, working session.
func (s *suite) testCreateAgain(t *testing.T) {
	ctx := ctxFor(t)
	id := newID(t)
	spec := func(file string) sandbox.Spec {
		return sandbox.Spec{ID: id, Options: s.opts.SandboxOptions, Labels: map[string]string{"troupe.test": "create-again"},
			Manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: file, Content: file}}}}
	}
	first, err := s.c.Create(ctx, spec("first.txt"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, first, "echo left > left.txt")
	second, err := s.c.Create(ctx, spec("second.txt"))
	if err != nil {
		first.Stop(ctx)
		t.Fatalf("Create of an existing session's ID: %v, want the session replaced", err)
	}
	t.Cleanup(func() {
		if err := second.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := first.Stop(context.Background()); err != nil {
			t.Errorf("Stop of the replaced session: %v", err)
		}
	})
	if err := second.Alive(ctx); err != nil {
		t.Fatalf("Alive: %v", err)
	}
	if out := run(t, second, "ls; cat second.txt"); out != "second.txt\nsecond.txt" {
		t.Errorf("the new session's workspace: %q, want only its own manifest", out)
	}
	if st := second.State(); st.ID != id {
		t.Errorf("State().ID = %q, want %q", st.ID, id)
	}
	resumed, err := s.c.Resume(ctx, second.State())
	if err != nil {
		t.Fatalf("Resume of the new session: %v", err)
	}
	if got, err := resumed.ReadFile(ctx, "second.txt"); err != nil || string(got) != "second.txt" {
		t.Errorf("resumed ReadFile: %q, %v", got, err)
	}
	// Creating again and again converges: no leftover makes it fail.
	third, err := s.c.Create(ctx, spec("third.txt"))
	if err != nil {
		t.Fatalf("third Create: %v", err)
	}
	if out := run(t, third, "ls"); out != "third.txt\n" {
		t.Errorf("the third session's workspace: %q", out)
	}
	if err := third.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func (s *suite) testConcurrent(t *testing.T) {
	sess := s.create(t, sandbox.Manifest{})
	ctx := ctxFor(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			res, err := sess.Exec(ctx, sandbox.ExecRequest{Cmd: fmt.Sprintf("echo %d > f%d; sleep 0.2; cat f%d", i, i, i), Timeout: 30 * time.Second})
			switch {
			case err != nil:
				errs <- err
			case res.ExitCode != 0 || res.Output != fmt.Sprintf("%d\n", i):
				errs <- fmt.Errorf("exec %d: exit %d, output %q", i, res.ExitCode, res.Output)
			}
		}()
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("w/%d.txt", i)
			if err := sess.WriteFile(ctx, p, []byte(p), 0o644); err != nil {
				errs <- err
				return
			}
			if b, err := sess.ReadFile(ctx, p); err != nil || string(b) != p {
				errs <- fmt.Errorf("ReadFile(%q) = %q, %v", p, b, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
