package capabilities_test

// End-to-end tests of the tools against a real sandbox session (the local
// backend): real files, real processes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// newSession provisions a local sandbox from manifest and returns a
// context carrying it, as the worker's sandbox activity does.
func newSession(t *testing.T, manifest sandbox.Manifest) (context.Context, sandbox.Session) {
	t.Helper()
	c, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Create(ctx, sandbox.Spec{ID: strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), Manifest: manifest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return sandbox.WithSession(ctx, s), s
}

// tool returns a capability's tool by name.
func tool(t *testing.T, c agents.Capability, name string) *agents.FunctionTool {
	t.Helper()
	for _, tl := range c.Tools() {
		if ft, ok := tl.(*agents.FunctionTool); ok && ft.Spec().Name == name {
			if !ft.NeedsSandbox() {
				t.Fatalf("tool %s does not act on the sandbox", name)
			}
			return ft
		}
	}
	t.Fatalf("capability %s has no tool %s", c.Name(), name)
	return nil
}

// execResult is the parsed plain-text result of exec_command.
var execResult = regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\nWall time: (\d+\.\d{4}) seconds\n((?:Process exited with code -?\d+\n)?)((?:Original token count: \d+\n)?)Output:\n`)

func TestExecCommand(t *testing.T) {
	ctx, _ := newSession(t, sandbox.Manifest{
		Entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "sub/dir"}},
		Env:     map[string]string{"GREETING": "hi"},
	})
	exec := tool(t, capabilities.Shell(), "exec_command")
	seq := ""
	for i := 1; i <= 5000; i++ {
		seq += fmt.Sprintf("%d\n", i)
	}
	tests := []struct {
		name      string
		args      string
		exit      string // the exit line, "" for none
		tokens    string // the original token count line, "" for none
		output    string // the exact output, unless outputRE is set
		outputRE  string
		maxWall   time.Duration
		maxOutput int
	}{
		{
			name:   "stdout and stderr",
			args:   `{"cmd":"echo $GREETING; echo oops >&2","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`,
			exit:   "Process exited with code 0\n",
			output: "hi\noops\n",
		},
		{
			name:   "optional arguments left out (non-strict servers)",
			args:   `{"cmd":"echo $GREETING"}`,
			exit:   "Process exited with code 0\n",
			output: "hi\n",
		},
		{
			name:   "exit code",
			args:   `{"cmd":"echo failing; exit 3","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`,
			exit:   "Process exited with code 3\n",
			output: "failing\n",
		},
		{
			name:   "workdir",
			args:   `{"cmd":"pwd | sed 's|.*/||'","workdir":"sub/dir","yield_time_ms":null,"max_output_tokens":null}`,
			exit:   "Process exited with code 0\n",
			output: "dir\n",
		},
		{
			name:   "workdir under /workspace",
			args:   `{"cmd":"ls ..","workdir":"/workspace/sub/dir","yield_time_ms":1000,"max_output_tokens":null}`,
			exit:   "Process exited with code 0\n",
			output: "dir\n",
		},
		{
			name:   "no output",
			args:   `{"cmd":"true","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`,
			exit:   "Process exited with code 0\n",
			output: "",
		},
		{
			name:   "truncated in the middle",
			args:   `{"cmd":"seq 1 5000","workdir":null,"yield_time_ms":null,"max_output_tokens":100}`,
			exit:   "Process exited with code 0\n",
			tokens: fmt.Sprintf("Original token count: %d\n", (len(seq)+3)/4),
			// 400 bytes: the header, ~170 bytes of head, the marker, ~170 of tail.
			outputRE:  `^Total output lines: 5000\n\n1\n2\n3\n(.|\n)*…\d+ tokens truncated…(.|\n)*\n4999\n5000\n$`,
			maxOutput: 100 * capabilities.BytesPerToken,
		},
		{
			name:     "timeout",
			args:     `{"cmd":"echo started; sleep 30","workdir":null,"yield_time_ms":300,"max_output_tokens":null}`,
			output:   "Command timed out after 0.300 seconds.\nstarted\n",
			maxWall:  10 * time.Second,
			outputRE: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := exec.Call(ctx, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			m := execResult.FindStringSubmatch(res)
			if m == nil {
				t.Fatalf("result does not have the SDK's shape:\n%s", res)
			}
			if m[2] != tt.exit {
				t.Errorf("exit line = %q; want %q", m[2], tt.exit)
			}
			if m[3] != tt.tokens {
				t.Errorf("token count line = %q; want %q", m[3], tt.tokens)
			}
			out := res[len(m[0]):]
			if tt.outputRE != "" {
				if !regexp.MustCompile(tt.outputRE).MatchString(out) {
					t.Errorf("output does not match %s:\n%s", tt.outputRE, out)
				}
			} else if out != tt.output {
				t.Errorf("output = %q; want %q", out, tt.output)
			}
			if tt.maxOutput > 0 && len(out) > tt.maxOutput {
				t.Errorf("output is %d bytes; want at most %d", len(out), tt.maxOutput)
			}
			if tt.maxWall > 0 && time.Since(start) > tt.maxWall {
				t.Errorf("the call took %v", time.Since(start))
			}
		})
	}
}

func TestExecCommandErrors(t *testing.T) {
	ctx, _ := newSession(t, sandbox.Manifest{})
	exec := tool(t, capabilities.Shell(), "exec_command")
	tests := []struct {
		name   string
		ctx    context.Context
		args   string
		msg    string
		target error
	}{
		{"no session", context.Background(), `{"cmd":"true","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`, "no sandbox session", capabilities.ErrNoSession},
		{"workdir escape", ctx, `{"cmd":"true","workdir":"../..","yield_time_ms":null,"max_output_tokens":null}`, `"../.." has a ".." element`, sandbox.ErrPathEscape},
		{"absolute workdir", ctx, `{"cmd":"true","workdir":"/etc","yield_time_ms":null,"max_output_tokens":null}`, `"/etc" is absolute`, sandbox.ErrPathEscape},
		{"missing workdir", ctx, `{"cmd":"true","workdir":"nope","yield_time_ms":null,"max_output_tokens":null}`, "nope", nil},
		{"empty command", ctx, `{"cmd":" ","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`, "cmd is empty", nil},
		{"missing required argument", ctx, `{"workdir":null}`, "invalid arguments for tool exec_command", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := exec.Call(tt.ctx, tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error = %v; want one containing %q", err, tt.msg)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.target)
			}
		})
	}
}

// patchArgs wraps a patch as apply_patch's arguments.
func patchArgs(patch string) string {
	return fmt.Sprintf(`{"input":%q}`, patch)
}

func TestApplyPatchTool(t *testing.T) {
	ctx, s := newSession(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "src/app.py", Content: "def greet():\n    print(\"Hi\")\n\n\ndef main():\n    greet()\n"},
		{Kind: sandbox.EntryFile, Path: "obsolete.txt", Content: "old\n"},
		{Kind: sandbox.EntryFile, Path: "run.sh", Content: "#!/bin/sh\necho one\n", Mode: 0o755},
	}})
	apply := tool(t, capabilities.Filesystem(), "apply_patch")
	ws := s.State().Workspace

	res, err := apply.Call(ctx, patchArgs(`*** Begin Patch
*** Add File: docs/hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print("Hi")
+    print("Hello, world!")
@@ def main():
     greet()
+    greet()
*** End of File
*** Delete File: obsolete.txt
*** Update File: run.sh
-echo one
+echo two
*** End Patch`))
	if err != nil {
		t.Fatal(err)
	}
	want := "Created docs/hello.txt\nUpdated src/app.py\nMoved src/app.py to src/main.py\nDeleted obsolete.txt\nUpdated run.sh"
	if res != want {
		t.Errorf("result = %q; want %q", res, want)
	}
	files := map[string]string{
		"docs/hello.txt": "Hello world\n",
		"src/main.py":    "def greet():\n    print(\"Hello, world!\")\n\n\ndef main():\n    greet()\n    greet()\n",
		"run.sh":         "#!/bin/sh\necho two\n",
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, gone := range []string{"src/app.py", "obsolete.txt"} {
		if _, err := os.Stat(filepath.Join(ws, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", gone, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(ws, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode = %v, %v; want 0755 kept", fi.Mode(), err)
	}
	// The script still runs, so the shell sees what the patch wrote.
	out, err := tool(t, capabilities.Shell(), "exec_command").Call(ctx, `{"cmd":"./run.sh","workdir":null,"yield_time_ms":null,"max_output_tokens":null}`)
	if err != nil || !strings.HasSuffix(out, "Output:\ntwo\n") {
		t.Errorf("./run.sh: %q, %v", out, err)
	}
}

// TestApplyPatchHostileFiles: apply_patch on files a command left to trip
// the worker (a FIFO nobody writes, one written forever, a 2 GiB sparse
// file, a 100 MB line) fails with an error that tells the model what to
// do, at once, and writes nothing.
func TestApplyPatchHostileFiles(t *testing.T) {
	ctx, s := newSession(t, sandbox.Manifest{})
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: `mkfifo fifo fed && dd if=/dev/zero of=sparse bs=1 count=1 seek=2147483647 2>/dev/null &&
head -c 100000000 /dev/zero | tr '\0' a > line`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("making hostile files: %v %+v", err, res)
	}
	go s.Exec(ctx, sandbox.ExecRequest{Cmd: "yes > fed", Timeout: time.Minute})
	apply := tool(t, capabilities.Filesystem(), "apply_patch")
	tests := []struct{ path, op, msg string }{
		{"fifo", "Update", "not a regular file"},
		{"fifo", "Add", "not a regular file"},
		{"fed", "Update", "not a regular file"},
		{"sparse", "Update", "larger than apply_patch edits (16 MiB at most); change it with a command instead"},
		{"line", "Delete", "larger than apply_patch edits"},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.path, func(t *testing.T) {
			body := map[string]string{"Update": "-x\n+y\n", "Add": "+y\n", "Delete": ""}[tt.op]
			_, err := apply.Call(ctx, patchArgs(fmt.Sprintf("*** Begin Patch\n*** %s File: %s\n%s*** End Patch", tt.op, tt.path, body)))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("apply_patch = %v; want an error containing %q", err, tt.msg)
			}
		})
	}
	if fi, err := os.Stat(filepath.Join(s.State().Workspace, "line")); err != nil || fi.Size() != 100000000 {
		t.Errorf("line after the refused patches: %v, %v", fi, err)
	}
}

// TestApplyPatchEscapes checks that no patch writes outside the
// workspace, whether by spelling or through a symlink, and that a rejected
// patch writes nothing inside it either.
func TestApplyPatchEscapes(t *testing.T) {
	outside := t.TempDir()
	ctx, s := newSession(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "keep.txt", Content: "keep\n"},
	}})
	ws := s.State().Workspace
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	apply := tool(t, capabilities.Filesystem(), "apply_patch")
	tests := []struct {
		name  string
		patch string
		msg   string
	}{
		{"parent", "*** Begin Patch\n*** Add File: ../x\n+pwned\n*** End Patch", `"../x" has a ".." element`},
		{"absolute", "*** Begin Patch\n*** Update File: /etc/passwd\n-root\n+me\n*** End Patch", `"/etc/passwd" is absolute`},
		{"deep parent after a good edit", "*** Begin Patch\n*** Update File: keep.txt\n-keep\n+changed\n*** Add File: a/../../../x\n+pwned\n*** End Patch", `"a/../../../x" has a ".." element`},
		{"through a symlink", "*** Begin Patch\n*** Update File: keep.txt\n-keep\n+changed\n*** Add File: link/pwned\n+pwned\n*** End Patch", "escapes the workspace"},
		{"move through a symlink", "*** Begin Patch\n*** Update File: keep.txt\n*** Move to: link/moved\n-keep\n+changed\n*** End Patch", "escapes the workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apply.Call(ctx, patchArgs(tt.patch))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error = %v; want one containing %q", err, tt.msg)
			}
			if !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("errors.Is(err, ErrPathEscape) = false: %v", err)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 {
				t.Errorf("the patch wrote outside the workspace: %v", entries)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "x")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the patch wrote next to the workspace (%v)", err)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, "keep.txt")); string(got) != "keep\n" {
				t.Errorf("keep.txt = %q; a rejected patch changed it", got)
			}
		})
	}
}

// images returns a small image encoded in each format view_image takes.
func images(t *testing.T) map[string][]byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for x := range 4 {
		for y := range 3 {
			img.Set(x, y, color.RGBA{R: uint8(60 * x), G: uint8(80 * y), B: 200, A: 255})
		}
	}
	out := map[string][]byte{}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	out["image/png"] = bytes.Clone(b.Bytes())
	b.Reset()
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	out["image/jpeg"] = bytes.Clone(b.Bytes())
	b.Reset()
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	out["image/gif"] = bytes.Clone(b.Bytes())
	// A minimal WebP container (a 1x1 lossless image).
	out["image/webp"] = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	return out
}

func TestViewImage(t *testing.T) {
	imgs := images(t)
	ctx, s := newSession(t, sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "notes.txt", Content: "not an image\n"},
		{Kind: sandbox.EntryFile, Path: "fake.png", Content: "<svg xmlns='http://www.w3.org/2000/svg'/>"},
		{Kind: sandbox.EntryDir, Path: "pics"},
	}})
	for mime, data := range imgs {
		name := "pics/img." + strings.TrimPrefix(mime, "image/")
		if err := s.WriteFile(ctx, name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	view := tool(t, capabilities.Filesystem(), "view_image")

	for mime, data := range imgs {
		t.Run(mime, func(t *testing.T) {
			name := "pics/img." + strings.TrimPrefix(mime, "image/")
			res, err := view.Call(ctx, fmt.Sprintf(`{"path":%q}`, "/workspace/"+name))
			if err != nil {
				t.Fatal(err)
			}
			img, ok := capabilities.ParseImageOutput(res)
			if !ok {
				t.Fatalf("result is not an image output: %.200s", res)
			}
			prefix := "data:" + mime + ";base64,"
			if !strings.HasPrefix(img.ImageURL, prefix) {
				t.Fatalf("image URL starts %.40q; want %q", img.ImageURL, prefix)
			}
			got, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(img.ImageURL, prefix))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("the data URL does not hold the file (%v)", err)
			}
			if want := fmt.Sprintf("Image %s (%s, %d bytes)", name, mime, len(data)); img.Text != want {
				t.Errorf("text = %q; want %q", img.Text, want)
			}
			// The model activity turns the output into an item with an image.
			items := capabilities.ExpandImages([]agents.Item{agents.FunctionCallOutput("call_1", res)})
			if items[0].Output != img.Text || len(items[0].Images) != 1 || items[0].Images[0] != img.ImageURL {
				t.Errorf("ExpandImages = %+v", items[0])
			}
		})
	}
	// The PNG decodes as the image the test drew.
	res, _ := view.Call(ctx, `{"path":"pics/img.png"}`)
	img, _ := capabilities.ParseImageOutput(res)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(img.ImageURL, "data:image/png;base64,"))
	if decoded, err := png.Decode(bytes.NewReader(raw)); err != nil || decoded.Bounds().Dx() != 4 {
		t.Errorf("the PNG does not decode: %v", err)
	}

	small := tool(t, capabilities.Filesystem(capabilities.WithMaxImageBytes(64)), "view_image")
	tests := []struct {
		name string
		tool *agents.FunctionTool
		path string
		msg  string
	}{
		{"text file", view, "notes.txt", "image path `notes.txt` is not a supported image file"},
		{"svg named .png", view, "fake.png", "image path `fake.png` is not a supported image file"},
		{"missing", view, "nope.png", "image path `nope.png` was not found"},
		{"directory", view, "pics", "image path `pics` is a directory"},
		{"too large", small, "pics/img.png", "image path `pics/img.png` exceeded the allowed size of 64 bytes"},
		{"escape", view, "../secret.png", `"../secret.png" has a ".." element`},
		{"absolute", view, "/etc/hostname", `"/etc/hostname" is absolute`},
		{"FIFO", view, "pipe.png", "image path `pipe.png` is not a regular file"},
		{"sparse giant", view, "giant.png", "image path `giant.png` exceeded the allowed size of 10MB"},
	}
	// Hostile files a command can leave: a FIFO nobody writes (a read would
	// block forever) and a 2 GiB sparse file.
	if res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: "mkfifo pipe.png && dd if=/dev/zero of=giant.png bs=1 count=1 seek=2147483647 2>/dev/null"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("making hostile files: %v %+v", err, res)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tool.Call(ctx, fmt.Sprintf(`{"path":%q}`, tt.path))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error = %v; want one containing %q", err, tt.msg)
			}
		})
	}
}
