package capabilities

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// DefaultMaxImageBytes is the largest file view_image sends to the model
// unless WithMaxImageBytes says otherwise.
const DefaultMaxImageBytes = 10 << 20

// ApplyPatchArgs are the arguments of apply_patch: the same single
// "input" string as the function-tool form of apply_patch that Codex
// models know.
type ApplyPatchArgs struct {
	// Input is the whole V4A patch.
	Input string `json:"input" jsonschema:"description=The entire patch from *** Begin Patch to *** End Patch."`
}

// ViewImageArgs are the arguments of view_image.
type ViewImageArgs struct {
	// Path is the image file, relative to the workspace root.
	Path string `json:"path" jsonschema:"description=Path to the image file (relative to the workspace root)."`
}

// FilesystemOption tunes Filesystem.
type FilesystemOption func(*filesystemConfig)

type filesystemConfig struct {
	maxImageBytes int64
}

// WithMaxImageBytes bounds the files view_image accepts; the default is
// DefaultMaxImageBytes.
func WithMaxImageBytes(n int64) FilesystemOption {
	return func(c *filesystemConfig) {
		if n > 0 {
			c.maxImageBytes = n
		}
	}
}

const applyPatchDescription = `Edits files in the workspace with a patch. Pass the whole patch as "input":

*** Begin Patch
[one or more file operations]
*** End Patch

Each file operation starts with a header:
*** Add File: <path>      creates a file; every following line starts with + and is a line of the new file.
*** Delete File: <path>   removes a file; no lines follow.
*** Update File: <path>   edits a file, optionally followed by "*** Move to: <new path>" to rename it.

An update has one or more hunks. A hunk starts with "@@" or "@@ <line>", where <line> is a line of the file (such as a class or function signature) that comes before the change and helps find it. Then come the hunk's lines: " " (a space) for a context line, "-" for a line to delete, "+" for a line to add. Show about 3 lines of context above and below each change, without repeating lines that the previous hunk already showed. End a hunk that reaches the end of the file with "*** End of File".

Example:
*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch

Paths are relative to the workspace root, never absolute.`

const filesystemInstructions = "Edit files with `apply_patch`, not with shell redirection or sed, and look at images in the workspace with `view_image`. Patch paths are relative to the workspace root."

// Filesystem gives a sandbox agent file tools:
//
//   - apply_patch {input}: applies a V4A patch (see ParsePatch) to the
//     workspace. Its result is ApplyPatch's summary, one line per file
//     ("Created a.txt", "Updated b.go", "Moved b.go to c.go", "Deleted
//     d.md"); a patch that cannot be parsed or applied changes nothing and
//     returns its *PatchError.
//   - view_image {path}: shows the model a PNG, JPEG, GIF or WebP image of
//     the workspace (sniffed from its content, at most
//     DefaultMaxImageBytes). Its result is an ImageOutput; see
//     ExpandImages for how it reaches the model.
func Filesystem(opts ...FilesystemOption) agents.Capability {
	cfg := filesystemConfig{maxImageBytes: DefaultMaxImageBytes}
	for _, o := range opts {
		o(&cfg)
	}
	patch := agents.MustFunctionTool("apply_patch", applyPatchDescription, applyPatchTool,
		agents.InSandbox(), agents.WithTimeout(2*time.Minute))
	view := agents.MustFunctionTool("view_image",
		"Shows you an image file (PNG, JPEG, GIF or WebP) from the workspace.",
		func(ctx context.Context, args ViewImageArgs) (ImageOutput, error) {
			return viewImage(ctx, args, cfg.maxImageBytes)
		},
		agents.InSandbox(), agents.WithTimeout(time.Minute))
	return &capability{
		name:         "filesystem",
		instructions: filesystemInstructions,
		tools:        []agents.Tool{patch, view},
	}
}

func applyPatchTool(ctx context.Context, args ApplyPatchArgs) (string, error) {
	s, ok := sandbox.SessionFrom(ctx)
	if !ok {
		return "", ErrNoSession
	}
	p, err := ParsePatch(args.Input)
	if err != nil {
		return "", err
	}
	return ApplyPatch(ctx, s, p)
}

// imageTypes are the types view_image sends, by their sniffed MIME type.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func viewImage(ctx context.Context, args ViewImageArgs, maxBytes int64) (ImageOutput, error) {
	s, ok := sandbox.SessionFrom(ctx)
	if !ok {
		return ImageOutput{}, ErrNoSession
	}
	p, err := workspaceFile(args.Path)
	if err != nil {
		return ImageOutput{}, fmt.Errorf("view_image: %w", err)
	}
	// Check the size before reading, when the listing has it.
	dir := path.Dir(p)
	if dir == "." {
		dir = ""
	}
	if infos, err := s.List(ctx, dir); err == nil {
		for _, fi := range infos {
			if fi.Name == path.Base(p) {
				if fi.IsDir {
					return ImageOutput{}, fmt.Errorf("image path `%s` is a directory", p)
				}
				if fi.Size > maxBytes {
					return ImageOutput{}, tooLarge(p, maxBytes)
				}
			}
		}
	}
	data, err := s.ReadFile(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return ImageOutput{}, fmt.Errorf("image path `%s` was not found", p)
	}
	if errors.Is(err, sandbox.ErrTooLarge) {
		return ImageOutput{}, tooLarge(p, maxBytes)
	}
	if errors.Is(err, sandbox.ErrNotRegular) {
		return ImageOutput{}, fmt.Errorf("image path `%s` is not a regular file (a FIFO, socket or device)", p)
	}
	if err != nil {
		return ImageOutput{}, fmt.Errorf("unable to read image at `%s`: %w", p, err)
	}
	if int64(len(data)) > maxBytes {
		return ImageOutput{}, tooLarge(p, maxBytes)
	}
	mime := sniffImage(data)
	if mime == "" {
		return ImageOutput{}, fmt.Errorf("image path `%s` is not a supported image file (PNG, JPEG, GIF or WebP)", p)
	}
	return ImageOutput{
		Text:     fmt.Sprintf("Image %s (%s, %d bytes)", p, mime, len(data)),
		ImageURL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data),
	}, nil
}

// sniffImage returns the MIME type of a PNG, JPEG, GIF or WebP image, or
// "" for anything else.
func sniffImage(data []byte) string {
	mime := http.DetectContentType(data)
	if imageTypes[mime] {
		return mime
	}
	return ""
}

func tooLarge(p string, maxBytes int64) error {
	return fmt.Errorf("image path `%s` exceeded the allowed size of %s; resize or compress the image and try again", p, byteSize(maxBytes))
}

// byteSize shows a byte count the way people write it ("10MB").
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
