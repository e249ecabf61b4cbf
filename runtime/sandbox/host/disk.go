package host

// Bounded workspaces. A workspace is a host directory that the host reads
// and writes (file operations, snapshots) and that commands write through a
// bind mount, so its size can only be bounded by the file system under it.
// Disks gives each workspace a file system of its own: an ext4 image file of
// sandbox.Limits.DiskBytes, sparse (it takes on the host's disk what the
// workspace holds, plus a little metadata), loop-mounted on the workspace
// directory. A write past the limit fails with ENOSPC, whatever writes it (a
// command, the host, a restore). The image lives beside the workspaces, in
// ROOT/.disks/NAME.img, so the workspace survives a worker's restart (the
// mount stays) and the host's (Reattach mounts it again).
//
// Mounting needs root (CAP_SYS_ADMIN), loop devices and mkfs.ext4
// (e2fsprogs); without them NewDisks reports why, and backends run with
// unbounded workspaces (and say so in their limit reports).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// disksDir is the directory under a workspace root that holds the images
// (a name no workspace gets: DirName never starts with a dot).
const disksDir = ".disks"

// MinDiskBytes is the smallest sandbox.Limits.DiskBytes a bounded workspace can
// have: ext4's journal and metadata need room of their own.
const MinDiskBytes = 8 << 20

// Disks makes and mounts the file systems of the workspaces under one
// root. Its methods are safe for concurrent use; a nil *Disks bounds
// nothing. Workspace.Destroy unmounts and removes what Attach made.
type Disks struct {
	root string // The workspace root, absolute.
	dir  string // root/.disks
	err  error  // Why workspaces cannot be bounded here; nil when they can.

	mu sync.Mutex // Serialises template creation and Reattach.

	poolMu  sync.Mutex
	pool    map[int64][]pooled // By size: file systems mounted nowhere yet.
	filling map[int64]bool     // Sizes being refilled.
	closed  bool
	fill    sync.WaitGroup
	poolN   atomic.Int64 // Names pool images.
}

// NewDisks returns the Disks of the workspace root, probing once that
// this host lets the worker make and mount one (with a small image); when
// it does not, the result's Err says why, and its Attach fails.
func NewDisks(root string) *Disks {
	d := &Disks{}
	root, err := filepath.Abs(root)
	if err != nil {
		d.err = err
		return d
	}
	d.root, d.dir = root, filepath.Join(root, disksDir)
	// Beside the workspaces' images (NAME.img): the empty images each
	// copies, the pool's, probes, and those of removed workspaces still
	// being torn down.
	for _, sub := range []string{"templates", "pool", "probe", "gone"} {
		if d.err = os.MkdirAll(filepath.Join(d.dir, sub), 0o700); d.err != nil {
			return d
		}
	}
	d.removeStale()
	if d.err = d.probe(); d.err != nil && os.Geteuid() != 0 {
		d.err = fmt.Errorf("mounting a file system needs root: %w", d.err)
	}
	return d
}

// Err is nil when workspaces can be bounded on this host, and says why
// not otherwise.
func (d *Disks) Err() error {
	if d == nil {
		return errors.New("no disks configured")
	}
	return d.err
}

// Mechanism describes how Disks bounds a workspace.
func (d *Disks) Mechanism() string {
	return "a loop-mounted ext4 image of the limit's size per workspace (under " + d.dir + ")"
}

// image is the image of the workspace directory dir.
func (d *Disks) image(dir string) string {
	return filepath.Join(d.dir, filepath.Base(dir)+".img")
}

// Attach gives the new, empty workspace directory dir a file system of
// size bytes. A size of zero leaves dir as it is.
//
// The file system is a copy of an empty ext4 image of that size (made
// once per size, sparse), mounted on dir. Mounting takes some
// milliseconds, so Disks keeps a few of each size used so far mounted
// ahead, detached (fsmount): Attach takes one and moves it onto dir, and
// makes another in the background.
func (d *Disks) Attach(dir string, size int64) error {
	if d == nil || size == 0 {
		return nil
	}
	if d.err != nil {
		return fmt.Errorf("sandbox: workspaces cannot be bounded here: %w", d.err)
	}
	if size < MinDiskBytes {
		return fmt.Errorf("sandbox: a workspace of %d bytes is below the %d bytes its file system needs", size, MinDiskBytes)
	}
	if filepath.Dir(dir) != d.root {
		return fmt.Errorf("sandbox: %s is not a workspace under %s", dir, d.root)
	}
	img := d.image(dir)
	m := d.take(size, img)
	if m == nil {
		var err error
		if m, err = d.prepare(size, img); err != nil {
			return err
		}
	}
	defer d.refill(size)
	if err := m.attach(dir); err != nil {
		os.Remove(img)
		return fmt.Errorf("sandbox: mount the workspace's file system: %w", err)
	}
	// mkfs makes lost+found; a fresh workspace holds only its manifest.
	os.Remove(filepath.Join(dir, "lost+found"))
	return nil
}

// prepare makes the image img of size bytes and mounts it nowhere yet.
func (d *Disks) prepare(size int64, img string) (*prepared, error) {
	tmpl, err := d.template(size)
	if err != nil {
		return nil, err
	}
	os.Remove(img)
	if err := cloneFile(tmpl, img); err != nil {
		os.Remove(img)
		return nil, fmt.Errorf("sandbox: workspace image: %w", err)
	}
	m, err := prepareImage(img)
	if err != nil {
		os.Remove(img)
		return nil, fmt.Errorf("sandbox: mount the workspace's file system: %w", err)
	}
	m.ready()
	return m, nil
}

// poolSize is how many file systems of each size Disks keeps ready.
const poolSize = 2

// pooled is a file system of the pool and its image.
type pooled struct {
	m   *prepared
	img string
}

// take returns a ready file system of size bytes, its image renamed to
// img, or nil when there is none.
func (d *Disks) take(size int64, img string) *prepared {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	for n := len(d.pool[size]); n > 0; n = len(d.pool[size]) {
		r := d.pool[size][n-1]
		d.pool[size] = d.pool[size][:n-1]
		if err := os.Rename(r.img, img); err == nil {
			return r.m
		}
		r.m.release()
		os.Remove(r.img)
	}
	return nil
}

// refill makes file systems of size bytes in the background until the
// pool has poolSize of them.
func (d *Disks) refill(size int64) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	if d.closed || d.filling[size] || len(d.pool[size]) >= poolSize {
		return
	}
	if d.pool == nil {
		d.pool, d.filling = map[int64][]pooled{}, map[int64]bool{}
	}
	d.filling[size] = true
	d.fill.Add(1)
	go func() {
		defer d.fill.Done()
		for {
			d.poolMu.Lock()
			if d.closed || len(d.pool[size]) >= poolSize {
				d.filling[size] = false
				d.poolMu.Unlock()
				return
			}
			d.poolMu.Unlock()
			img := filepath.Join(d.dir, "pool", fmt.Sprintf("%d-%d.img", os.Getpid(), d.poolN.Add(1)))
			m, err := d.prepare(size, img)
			d.poolMu.Lock()
			if err != nil {
				d.filling[size] = false
				d.poolMu.Unlock()
				return
			}
			d.pool[size] = append(d.pool[size], pooled{m: m, img: img})
			d.poolMu.Unlock()
		}
	}()
}

// Close drops the file systems kept ready, and waits for those being
// made. Attach still works after it, without a pool.
func (d *Disks) Close() error {
	if d == nil {
		return nil
	}
	d.poolMu.Lock()
	d.closed = true
	d.poolMu.Unlock()
	d.fill.Wait()
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	for size, rs := range d.pool {
		for _, r := range rs {
			r.m.release()
			os.Remove(r.img)
		}
		delete(d.pool, size)
	}
	return nil
}

// Reattach mounts the image of the workspace directory dir again when it
// has one and it is not mounted (after the host restarted). A workspace
// without an image is left as it is: it was made unbounded.
func (d *Disks) Reattach(dir string) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	img := d.image(dir)
	if _, err := os.Stat(img); err != nil {
		return nil
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return fmt.Errorf("sandbox: workspace %s has an image but holds files of its own: %v", dir, err)
	}
	if d.err != nil {
		return fmt.Errorf("sandbox: cannot mount the image of workspace %s: %w", dir, d.err)
	}
	if imageInUse(img) {
		return fmt.Errorf("sandbox: the file system of workspace %s is not mounted on it, but still in use elsewhere", dir)
	}
	return mountImage(img, dir)
}

// detachDisk unmounts the file system of the workspace directory dir, if
// it has one (Disks.Attach), and removes its image; the directory itself
// stays. Workspace.Destroy calls it first, so every removal of a
// workspace (Stop, Create replacing an earlier one, a reaper) frees its
// file system. It is idempotent. The file system is detached at once; its
// teardown and the image's removal finish in the background
// (WaitDetached waits for them).
func detachDisk(dir string) error {
	img := filepath.Join(filepath.Dir(dir), disksDir, filepath.Base(dir)+".img")
	mounted, err := isMountPoint(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if !mounted {
		if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	release, err := detachMount(dir)
	if err != nil {
		return fmt.Errorf("sandbox: unmount workspace %s: %w", dir, err)
	}
	// Out of the way of a new session of the same id.
	gone := filepath.Join(filepath.Dir(img), "gone", fmt.Sprintf("%d-%d.img", os.Getpid(), detached.n.Add(1)))
	if err := os.Rename(img, gone); err != nil {
		gone = img
	}
	detached.wg.Add(1)
	go func() {
		defer detached.wg.Done()
		release()
		os.Remove(gone)
	}()
	return nil
}

// detached tracks the teardowns detachDisk left in the background.
var detached struct {
	wg sync.WaitGroup
	n  atomic.Int64 // Names detached images.
}

// WaitDetached waits for the teardown of the file systems of the
// workspaces removed so far, which finishes in the background.
func WaitDetached() { detached.wg.Wait() }

// template returns the path of the empty image of size bytes, making it
// when missing.
func (d *Disks) template(size int64) (string, error) {
	p := filepath.Join(d.dir, "templates", fmt.Sprintf("ext4-%d.img", size))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	tmp := filepath.Join(d.dir, "templates", fmt.Sprintf("tmp-%d-%d", os.Getpid(), size))
	defer os.Remove(tmp)
	if err := makeImage(tmp, size); err != nil {
		return "", fmt.Errorf("sandbox: make a workspace file system: %w", err)
	}
	return p, os.Rename(tmp, p)
}

// probe makes, mounts and removes a small workspace file system.
func (d *Disks) probe() error {
	dir, err := os.MkdirTemp(filepath.Join(d.dir, "probe"), fmt.Sprintf("%d-", os.Getpid()))
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	img := dir + ".img"
	defer os.Remove(img)
	m, err := d.prepare(MinDiskBytes, img)
	if err != nil {
		return err
	}
	if err := m.attach(dir); err != nil {
		return err
	}
	release, err := detachMount(dir)
	if err != nil {
		return err
	}
	release()
	return nil
}

// removeStale removes what a killed worker left: images whose workspace
// directory is gone, and the pool images, probes and images being torn
// down of processes that are gone.
func (d *Disks) removeStale() {
	entries, _ := os.ReadDir(d.dir)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".img")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d.root, name)); errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
	for _, sub := range []string{"pool", "probe", "gone", "templates"} {
		entries, _ := os.ReadDir(filepath.Join(d.dir, sub))
		for _, e := range entries {
			name := e.Name()
			if sub == "templates" {
				var ok bool
				if name, ok = strings.CutPrefix(name, "tmp-"); !ok {
					continue // A template.
				}
			}
			pid, _, _ := strings.Cut(name, "-")
			if n, err := strconv.Atoi(pid); err != nil || processAlive(n) {
				continue
			}
			p := filepath.Join(d.dir, sub, e.Name())
			if mounted, _ := isMountPoint(p); mounted && e.IsDir() {
				if release, err := detachMount(p); err == nil {
					release()
				}
			}
			os.Remove(p)
		}
	}
}
