package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func ExampleCleanPath() {
	for _, p := range []string{"./src//main.go", "../etc/passwd", "/etc/passwd"} {
		clean, err := sandbox.CleanPath(p)
		fmt.Printf("%q %v\n", clean, errors.Is(err, sandbox.ErrPathEscape))
	}
	// Output:
	// "src/main.go" false
	// "" true
	// "" true
}

func ExampleCapOutput() {
	text, truncated := sandbox.CapOutput([]byte("first line\n...many lines...\nlast line\n"), 20)
	fmt.Println(truncated)
	fmt.Print(text)
	// Output:
	// true
	// first line
	// …[18 bytes truncated]…
	// last line
}

func ExampleManifest_Validate() {
	m := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "notes.md", Content: "# Notes\n"},
		{Kind: sandbox.EntryLocalFile, Path: "passwd", Source: "/etc/passwd"},
	}}
	err := m.Validate(sandbox.Policy{}) // The zero Policy allows no host source.
	fmt.Println(errors.Is(err, sandbox.ErrSourceNotAllowed))
	// Output:
	// true
}

func ExampleWorkspace_Snapshot() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	// Provision a workspace from a manifest, as a backend's Create does.
	w, err := sandbox.Provision(ctx, root, sandbox.Spec{ID: "example", Manifest: sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "src/main.go", Content: "package main\n"},
		{Kind: sandbox.EntryDir, Path: "cache", Ephemeral: true},
	}}}, sandbox.Policy{})
	if err != nil {
		fmt.Println(err)
		return
	}
	w.WriteFile(ctx, "cache/big", []byte("left out of snapshots"), 0)

	var snap bytes.Buffer
	w.Snapshot(ctx, &snap)

	// Restore into another workspace: on this backend or any other.
	other, _ := sandbox.Provision(ctx, root, sandbox.Spec{ID: "restored"}, sandbox.Policy{})
	other.Restore(ctx, &snap)
	b, _ := other.ReadFile(ctx, "src/main.go")
	_, err = other.ReadFile(ctx, "cache/big")
	fmt.Printf("%q %v\n", b, errors.Is(err, os.ErrNotExist))

	// Escapes fail, whatever the spelling.
	err = other.WriteFile(ctx, "../x", nil, 0)
	fmt.Println(errors.Is(err, sandbox.ErrPathEscape))
	// Output:
	// "package main\n" true
	// true
}
