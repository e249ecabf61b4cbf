package lease

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestStoreIdentity: a store's identity is made once and read back from
// the same file; a copy of the file (another inode, or made on another
// machine) gets an identity of its own and says which it replaced; a file
// that does not parse fails, naming it.
func TestStoreIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandboxes")
	first, err := OpenStoreIdentity(dir, "web 1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "web-1-") || len(first.ID) != len("web-1-")+16 || first.Replaced != "" {
		t.Errorf("new identity = %+v, want web-1-<16 hex digits>, replacing nothing", first)
	}
	again, err := OpenStoreIdentity(dir, "renamed")
	if err != nil || again != first {
		t.Errorf("opened again (the host renamed since) = %+v, %v; want %+v", again, err, first)
	}
	if IdentityQueue(first.ID) != "troupe-sandbox-"+first.ID {
		t.Errorf("identity queue %s", IdentityQueue(first.ID))
	}
	original, err := os.ReadFile(filepath.Join(dir, StoreIDFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec storeIDRecord
	if err := json.Unmarshal(original, &rec); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// write puts a store's file in dir.
		write   func(t *testing.T, dir string)
		replace string // in Why; "" for the same identity
		fail    string // in the error; "" for none
	}{
		{"copied whole (cp -a: another inode)", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, StoreIDFile), original)
		}, "copy of the file", ""},
		{"made on another machine", func(t *testing.T, dir string) {
			if machineHash() == "" {
				t.Fatal("this machine has no machine id to tell another by")
			}
			writeFile(t, filepath.Join(dir, StoreIDFile), []byte("{}"))
			other := rec
			other.Machine, other.Inode = "0123456789abcdef", inodeOf(filepath.Join(dir, StoreIDFile))
			b, _ := json.Marshal(other)
			writeFile(t, filepath.Join(dir, StoreIDFile), b) // in place: the inode stays
		}, "another machine", ""},
		{"of before machine ids and inodes", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, StoreIDFile), []byte(`{"id":"`+rec.ID+`"}`))
		}, "", ""},
		{"garbled", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, StoreIDFile), []byte("not json"))
		}, "", "does not parse"},
		{"no identity in it", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, StoreIDFile), []byte(`{"id":"a b"}`))
		}, "", "no valid identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.write(t, dir)
			id, err := OpenStoreIdentity(dir, "web-1")
			switch {
			case tc.fail != "":
				if err == nil || !strings.Contains(err.Error(), tc.fail) || !strings.Contains(err.Error(), StoreIDFile) {
					t.Errorf("open = %+v, %v; want an error naming %s and saying %q", id, err, StoreIDFile, tc.fail)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.replace == "":
				if id.ID != rec.ID || id.Replaced != "" {
					t.Errorf("open = %+v, want %s, replacing nothing", id, rec.ID)
				}
				return
			}
			if id.ID == rec.ID || id.Replaced != rec.ID || !strings.Contains(id.Why, tc.replace) {
				t.Errorf("open = %+v; want a new identity replacing %s because of a %s", id, rec.ID, tc.replace)
			}
			// The new identity is kept: the next worker reads it back.
			if next, err := OpenStoreIdentity(dir, "web-1"); err != nil || next.ID != id.ID || next.Replaced != "" {
				t.Errorf("opened after the replacement = %+v, %v; want %s", next, err, id.ID)
			}
		})
	}
}

// TestStoreIdentityAtOnce: workers that start at once on a new store
// agree on its identity.
func TestStoreIdentityAtOnce(t *testing.T) {
	dir := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := OpenStoreIdentity(dir, "h")
			if err != nil {
				t.Error(err)
			}
			ids[i] = id.ID
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("identities %v; want one", ids)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
