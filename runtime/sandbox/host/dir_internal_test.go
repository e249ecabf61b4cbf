package host

// openDir refuses a symlink, though os.Root.OpenFile follows one in the
// last component (inside the root) even with O_NOFOLLOW; a directory a
// concurrent command swaps for a symlink between the walk's ReadDir and
// its open is not walked through, so the target's files are never
// archived under the symlink's path.

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenDirRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.MkdirAll(filepath.Join(dir, "z-private"), 0o755)
	os.WriteFile(filepath.Join(dir, "z-private", "key"), []byte("k"), 0o600)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if d, err := openDir(root, "z-private"); err == nil {
		d.close()
	}
	os.Symlink("z-private", filepath.Join(dir, "l"))
	if d, err := openDir(root, "l"); err == nil {
		d.close()
		t.Errorf("openDir of the symlink l succeeded: it is followed, not refused")
	}
	top, err := openDir(root, ".")
	if err != nil {
		t.Fatal(err)
	}
	defer top.close()
	var seen []string
	top.walk(context.Background(), func(p string, _ *wsDir, e fs.DirEntry) error {
		seen = append(seen, p)
		if p == "a" { // a concurrent command swaps a for a symlink now
			os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "a.old"))
			os.Symlink("z-private", filepath.Join(dir, "a"))
		}
		return nil
	})
	for _, p := range seen {
		if p == "a/key" {
			t.Errorf("walk went through the swapped-in symlink: %v", seen)
		}
	}
}
