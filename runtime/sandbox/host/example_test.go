package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func ExampleWorkspace_Snapshot() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	// Provision a workspace from a manifest, as a backend's Create does.
	w, err := host.Provision(ctx, root, sandbox.Spec{ID: "example", Manifest: sandbox.Manifest{Entries: []sandbox.Entry{
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
	other, _ := host.Provision(ctx, root, sandbox.Spec{ID: "restored"}, sandbox.Policy{})
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
