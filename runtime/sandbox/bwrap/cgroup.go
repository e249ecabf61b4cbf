package bwrap

// The pids cgroup that bounds a session's processes. RLIMIT_NPROC cannot
// do it when the worker runs as root (the kernel exempts uid 0, even in a
// user namespace that maps to it), so when the host lets us create
// cgroups, each session gets one with pids.max set, and every command's
// sandbox is moved into it before it runs anything.

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupParent is the cgroup directory under which sessions get theirs.
type cgroupParent struct {
	dir string
	v2  bool
}

// parentName is the cgroup, under the worker's own, that holds sessions'.
const parentName = "troupe-bwrap"

// detectCgroup finds a pids cgroup hierarchy the worker may write to and
// makes the parent cgroup in it. override, when set, names the parent
// directly.
func detectCgroup(override string) (*cgroupParent, error) {
	var p *cgroupParent
	if override != "" {
		_, err := os.Stat(filepath.Join(filepath.Dir(override), "cgroup.controllers"))
		p = &cgroupParent{dir: override, v2: err == nil}
	} else {
		var err error
		if p, err = findPidsHierarchy(); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(p.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", p.dir, err)
	}
	if p.v2 {
		// Controllers must be enabled top-down: in our own cgroup for the
		// parent, and in the parent for the sessions'.
		for _, d := range []string{filepath.Dir(p.dir), p.dir} {
			if err := enableController(d, "pids"); err != nil {
				return nil, err
			}
		}
	}
	probe := filepath.Join(p.dir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", probe, err)
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "pids.max")); err != nil {
		return nil, fmt.Errorf("no pids controller in %s: %w", p.dir, err)
	}
	return p, nil
}

func enableController(dir, name string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(string(b)), name) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+name), 0); err != nil {
		return fmt.Errorf("enable %s in %s: %w", name, dir, err)
	}
	return nil
}

// findPidsHierarchy returns the parent cgroup under the worker's own
// cgroup in the pids hierarchy: the v1 pids controller's when mounted,
// otherwise the unified (v2) hierarchy's.
func findPidsHierarchy() (*cgroupParent, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var v1, v2 string
	sc := bufio.NewScanner(strings.NewReader(string(mounts)))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup":
			if slices.Contains(strings.Split(qf[2], ","), "pids") && v1 == "" {
				v1 = pf[4]
			}
		case "cgroup2":
			if v2 == "" {
				v2 = pf[4]
			}
		}
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case v1 != "" && slices.Contains(strings.Split(parts[1], ","), "pids"):
			return &cgroupParent{dir: filepath.Join(v1, parts[2], parentName)}, nil
		}
	}
	if v2 != "" {
		for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok {
				ctl, err := os.ReadFile(filepath.Join(v2, rest, "cgroup.controllers"))
				if err != nil || !slices.Contains(strings.Fields(string(ctl)), "pids") {
					return nil, fmt.Errorf("the cgroup v2 hierarchy offers no pids controller to %s", rest)
				}
				return &cgroupParent{dir: filepath.Join(v2, rest, parentName), v2: true}, nil
			}
		}
	}
	return nil, errors.New("no pids cgroup hierarchy is mounted")
}

// enter puts pid into the session cgroup name, creating it with pids.max
// set to max.
func (p *cgroupParent) enter(name string, max int, pid int) error {
	d := filepath.Join(p.dir, name)
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// remove kills every process left in the session cgroup name and removes
// it. It is idempotent.
func (p *cgroupParent) remove(name string) error {
	d := filepath.Join(p.dir, name)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			break
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v outlive SIGKILL in %s", pids, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		// EBUSY while the last killed processes are reaped.
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
