package host_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/bwrap"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// TestSnapshotPortable takes a snapshot in a docker sandbox, of files made
// inside the container, and restores it into bwrap and local sandboxes:
// contents, modes and symlinks arrive intact, and commands see them.
func TestSnapshotPortable(t *testing.T) {
	ctx := context.Background()
	dc, err := docker.New(docker.Config{Root: t.TempDir(), Image: docker.BusyboxImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() }) // Before its root goes: it holds workspace file systems.
	if err := dc.Ping(ctx); err != nil {
		t.Fatalf("the Docker Engine does not answer (run scripts/setup.sh): %v", err)
	}
	if err := dc.BuildImage(ctx, docker.BuildOptions{Kind: "busybox", Name: docker.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
	src, err := dc.Create(ctx, sandbox.Spec{ID: "portable-src", Manifest: sandbox.Manifest{
		Entries: []sandbox.Entry{
			{Kind: sandbox.EntryFile, Path: "notes/manifest.txt", Content: "from the manifest\n"},
			{Kind: sandbox.EntryFile, Path: "cache/tmp.bin", Content: "ephemeral", Ephemeral: true},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop(ctx)
	res, err := src.Exec(ctx, sandbox.ExecRequest{Cmd: "mkdir -p a/b && printf 'made in docker\\n' > a/b/c.txt && " +
		"printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod 755 run.sh && ln -s a/b/c.txt link && head -c 4096 /dev/urandom > blob.bin"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup in docker: %v %+v", err, res)
	}
	var snap bytes.Buffer
	if err := src.Snapshot(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	want, err := src.ReadFile(ctx, "blob.bin")
	if err != nil {
		t.Fatal(err)
	}

	bc, err := bwrap.New(bwrap.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	lc, err := local.New(local.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []sandbox.Client{bc, lc} {
		t.Run(c.Backend(), func(t *testing.T) {
			dst, err := c.Create(ctx, sandbox.Spec{ID: "portable-dst"})
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Stop(ctx)
			if err := dst.Restore(ctx, bytes.NewReader(snap.Bytes())); err != nil {
				t.Fatal(err)
			}
			got, err := dst.ReadFile(ctx, "blob.bin")
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("blob.bin differs after the restore (%v)", err)
			}
			res, err := dst.Exec(ctx, sandbox.ExecRequest{Cmd: "cat link notes/manifest.txt && ./run.sh && ls cache 2>&1 || true"})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"made in docker", "from the manifest", "ran"} {
				if !strings.Contains(res.Output, w) {
					t.Errorf("output %q lacks %q", res.Output, w)
				}
			}
			if _, err := dst.ReadFile(ctx, "cache/tmp.bin"); err == nil {
				t.Error("the ephemeral entry was restored")
			}
			infos, err := dst.List(ctx, ".")
			if err != nil {
				t.Fatal(err)
			}
			for _, fi := range infos {
				if fi.Name == "run.sh" && fi.Mode.Perm() != 0o755 {
					t.Errorf("run.sh mode = %v, want 0755", fi.Mode.Perm())
				}
			}
		})
	}
}
