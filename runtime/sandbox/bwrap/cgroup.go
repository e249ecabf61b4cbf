package bwrap

// The cgroups that bound a session's processes together: one per session
// in each hierarchy that has a controller we use, pids (pids.max: the
// kernel exempts uid 0 from RLIMIT_NPROC, even in a user namespace that
// maps to it) and memory (all of the session's memory, its /tmp's pages
// included, with no swap on top). Every command's bwrap goes into them as
// it starts, and the sandbox's PID 1 before it runs anything, so bwrap's
// own small process counts towards the session's limits too. A controller this host does not let the
// worker use is left out, and Client.Enforced says why.

import (
	"bufio"
	"crypto/sha256"
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

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// cgroupParent is where sessions get their cgroups: a parent cgroup in
// each hierarchy that has one of the controllers.
type cgroupParent struct {
	// name is the parent cgroup's name under the worker's own cgroup
	// (parentFor).
	name string
	// ours: the parents were found, not given (Config.CgroupParent), so
	// the client may remove them when it closes.
	ours bool
	// dir is the parent in the hierarchy of the pids controller (of the
	// memory controller when pids is missing): hier[0]'s.
	dir  string
	hier []cgroupHier
	// pidsWhy and memWhy say why a controller is not used; "" when it is.
	pidsWhy, memWhy string
}

// cgroupHier is the parent cgroup of sessions in one hierarchy.
type cgroupHier struct {
	dir          string
	v2           bool
	pids, memory bool
	// swap: the memory controller bounds swap too, so the limit is
	// memory and swap together (v1 memory.memsw), or no swap (v2).
	swap bool
}

// parentName begins the name of the cgroup, under the worker's own, that
// holds sessions'.
const parentName = "troupe-bwrap"

// parentFor names the parent cgroup of the sessions whose workspaces are
// under root: troupe-bwrap-<8 hex digits of root>. Workers of one cgroup
// with different roots (two TROUPE_HOMEs in one container or systemd
// unit) then have parents of their own, and one never kills or removes
// the other's session cgroups, even for sessions of the same id.
func parentFor(root string) string {
	sum := sha256.Sum256([]byte(root))
	return fmt.Sprintf("%s-%x", parentName, sum[:4])
}

// Controllers a session cgroup uses.
const (
	ctlPids   = "pids"
	ctlMemory = "memory"
)

// mechanism describes what bounds a controller's limit, e.g. "cgroup v1
// memory.limit_in_bytes per session under DIR".
func (p *cgroupParent) mechanism(ctl string) string {
	for _, h := range p.hier {
		switch {
		case ctl == ctlPids && h.pids:
			return fmt.Sprintf("cgroup %s pids.max per session under %s", h.version(), h.dir)
		case ctl == ctlMemory && h.memory && h.v2:
			return fmt.Sprintf("cgroup v2 memory.max and memory.swap.max=0 per session under %s", h.dir)
		case ctl == ctlMemory && h.memory && h.swap:
			return fmt.Sprintf("cgroup v1 memory.limit_in_bytes and memory.memsw.limit_in_bytes per session under %s", h.dir)
		case ctl == ctlMemory && h.memory:
			return fmt.Sprintf("cgroup v1 memory.limit_in_bytes per session under %s (swap not accounted: the kernel runs without swapaccount)", h.dir)
		}
	}
	return ""
}

func (h cgroupHier) version() string {
	if h.v2 {
		return "v2"
	}
	return "v1"
}

// has reports whether a session cgroup bounds ctl.
func (p *cgroupParent) has(ctl string) bool {
	return p != nil && p.mechanism(ctl) != ""
}

// detectCgroup finds the hierarchies of the pids and memory controllers
// that the worker may create cgroups in, and makes the parent cgroup in
// each. override, when set, names the one parent directly. It fails when
// neither controller can be used; a controller that cannot be used is
// left out, and pidsWhy or memWhy says why.
func detectCgroup(override, name string) (*cgroupParent, error) {
	p := &cgroupParent{name: name, ours: override == ""}
	var cands []cgroupHier
	if override != "" {
		_, err := os.Stat(filepath.Join(filepath.Dir(override), "cgroup.controllers"))
		cands = []cgroupHier{{dir: override, v2: err == nil, pids: true, memory: true}}
	} else {
		var err error
		if cands, err = findHierarchies(p); err != nil {
			return nil, err
		}
	}
	for _, h := range cands {
		if h, ok := p.setUp(h, override != ""); ok {
			p.hier = append(p.hier, h)
		}
	}
	// The pids hierarchy first: its parent is dir.
	slices.SortStableFunc(p.hier, func(a, b cgroupHier) int {
		if a.pids == b.pids {
			return 0
		}
		if a.pids {
			return -1
		}
		return 1
	})
	if len(p.hier) == 0 {
		return nil, fmt.Errorf("pids: %s; memory: %s", p.pidsWhy, p.memWhy)
	}
	p.dir = p.hier[0].dir
	if !p.has(ctlPids) && p.pidsWhy == "" {
		p.pidsWhy = "no pids controller in " + p.dir
	}
	if !p.has(ctlMemory) && p.memWhy == "" {
		p.memWhy = "no memory controller in " + p.dir
	}
	return p, nil
}

// remake makes the parent cgroup h again, with its controllers enabled
// for the sessions' (v2), as setUp found them.
func (h cgroupHier) remake() error {
	if err := os.Mkdir(h.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if !h.v2 {
		return nil
	}
	for _, ctl := range []string{ctlPids, ctlMemory} {
		if ctl == ctlPids && h.pids || ctl == ctlMemory && h.memory {
			if err := enableController(h.dir, ctl); err != nil {
				return err
			}
		}
	}
	return nil
}

// close removes the parent cgroups the client made when no session
// cgroup is left in them (a directory that is not empty stays: rmdir
// refuses it), so that clients of short-lived roots leave no cgroup
// behind. A parent given by Config.CgroupParent is the caller's.
func (p *cgroupParent) close() {
	if p == nil || !p.ours {
		return
	}
	for _, h := range p.hier {
		os.Remove(h.dir)
	}
}

// removeEmptySiblings removes the parent cgroups of other roots' clients
// (troupe-bwrap-*, beside p's own) that hold no session cgroup and were
// made more than olderThan ago (cgroupfs keeps a directory's mtime at its
// making): those of clients that ended without Close. rmdir refuses a
// cgroup that holds cgroups or processes, so a live session's parent
// stays; a live client whose empty parent goes makes it again before its
// next session (prepare's remake), and a parent made less than olderThan
// ago, still being set up, is left alone.
func (p *cgroupParent) removeEmptySiblings(olderThan time.Duration) {
	if p == nil || !p.ours {
		return
	}
	for _, h := range p.hier {
		up := filepath.Dir(h.dir)
		entries, err := os.ReadDir(up)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || filepath.Join(up, name) == h.dir || name != parentName && !strings.HasPrefix(name, parentName+"-") {
				continue
			}
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < olderThan {
				continue
			}
			os.Remove(filepath.Join(up, name))
		}
	}
}

// setUp makes the parent cgroup of h, enables h's controllers in it (v2)
// and checks, in a probe cgroup under it, which of them sessions get.
// Each controller h loses on the way gets its reason in p.
func (p *cgroupParent) setUp(h cgroupHier, override bool) (cgroupHier, bool) {
	fail := func(ctl string, err error) {
		why := err.Error()
		if ctl == ctlMemory && h.v2 && errors.Is(err, syscall.EBUSY) {
			why += " (cgroup v2 lets a cgroup that holds processes delegate no memory controller: run the worker in a cgroup of its own under one that delegates memory, or set Config.CgroupParent)"
		}
		switch ctl {
		case ctlPids:
			h.pids, p.pidsWhy = false, why
		case ctlMemory:
			h.memory, p.memWhy = false, why
		}
	}
	both := func(err error) (cgroupHier, bool) {
		if h.pids {
			fail(ctlPids, err)
		}
		if h.memory {
			fail(ctlMemory, err)
		}
		return h, false
	}
	if err := os.Mkdir(h.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return both(fmt.Errorf("create %s: %w", h.dir, err))
	}
	if h.v2 {
		// Controllers must be enabled top-down: in our own cgroup for the
		// parent, and in the parent for the sessions'.
		for _, ctl := range []string{ctlPids, ctlMemory} {
			if ctl == ctlPids && !h.pids || ctl == ctlMemory && !h.memory {
				continue
			}
			for _, d := range []string{filepath.Dir(h.dir), h.dir} {
				if err := enableController(d, ctl); err != nil {
					fail(ctl, err)
					break
				}
			}
		}
	}
	probe := filepath.Join(h.dir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return both(fmt.Errorf("create %s: %w", probe, err))
	}
	defer os.Remove(probe)
	exists := func(f string) bool {
		_, err := os.Stat(filepath.Join(probe, f))
		return err == nil
	}
	if h.pids && !exists("pids.max") {
		msg := "no pids controller in " + h.dir
		if !override {
			msg = "the pids controller is not enabled in " + h.dir
		}
		fail(ctlPids, errors.New(msg))
	}
	if h.memory {
		limit, swap := "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"
		if h.v2 {
			limit, swap = "memory.max", "memory.swap.max"
		}
		if exists(limit) {
			h.swap = exists(swap)
		} else {
			fail(ctlMemory, errors.New("no memory controller in "+h.dir))
		}
	}
	return h, h.pids || h.memory
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

// findHierarchies returns the parent cgroups, under the worker's own, in
// the hierarchies of the pids and memory controllers: each controller's
// v1 hierarchy when mounted, otherwise the unified (v2) one when it
// offers the controller. A controller found in neither gets its reason in
// p.
func findHierarchies(p *cgroupParent) ([]cgroupHier, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	v1 := map[string]string{} // Controller to mount point.
	var v2 string
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
			for _, opt := range strings.Split(qf[2], ",") {
				if (opt == ctlPids || opt == ctlMemory) && v1[opt] == "" {
					v1[opt] = pf[4]
				}
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
	ownV1 := map[string]string{} // Controller to the worker's cgroup.
	var ownV2 string
	hasV2 := false
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			ownV2, hasV2 = parts[2], true
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			ownV1[ctl] = parts[2]
		}
	}
	var v2ctl []string
	if v2 != "" && hasV2 {
		b, _ := os.ReadFile(filepath.Join(v2, ownV2, "cgroup.controllers"))
		v2ctl = strings.Fields(string(b))
	}
	var out []cgroupHier
	add := func(h cgroupHier, ctl string) {
		for i := range out {
			if out[i].dir == h.dir {
				h = out[i]
				out = slices.Delete(out, i, i+1)
				break
			}
		}
		if ctl == ctlPids {
			h.pids = true
		} else {
			h.memory = true
		}
		out = append(out, h)
	}
	for _, ctl := range []string{ctlPids, ctlMemory} {
		switch {
		case v1[ctl] != "" && ownV1[ctl] != "":
			add(cgroupHier{dir: filepath.Join(v1[ctl], ownV1[ctl], p.name)}, ctl)
		case slices.Contains(v2ctl, ctl):
			add(cgroupHier{dir: filepath.Join(v2, ownV2, p.name), v2: true}, ctl)
		default:
			why := "no " + ctl + " cgroup hierarchy is mounted"
			if v2 != "" && hasV2 {
				why = fmt.Sprintf("the cgroup v2 hierarchy offers no %s controller to %s", ctl, ownV2)
			}
			if ctl == ctlPids {
				p.pidsWhy = why
			} else {
				p.memWhy = why
			}
		}
	}
	return out, nil
}

// prepare makes the session cgroup name, in each hierarchy, with the
// limits l; it may exist already. It is what costs in entering a session
// cgroup (a v1 memory cgroup takes milliseconds to make), so a command
// prepares while bwrap starts, and attaches once bwrap has a PID 1.
func (p *cgroupParent) prepare(name string, l sandbox.Limits) error {
	for _, h := range p.hier {
		d := filepath.Join(h.dir, name)
		err := os.Mkdir(d, 0o755)
		if errors.Is(err, fs.ErrNotExist) {
			// The parent was removed when a client of this root closed.
			err = h.remake()
			if err == nil {
				err = os.Mkdir(d, 0o755)
			}
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		var set [][2]string
		if h.pids {
			set = append(set, [2]string{"pids.max", strconv.Itoa(l.PIDs)})
		}
		mem := strconv.FormatInt(l.MemoryBytes, 10)
		switch {
		case h.memory && h.v2:
			set = append(set, [2]string{"memory.max", mem})
			if h.swap {
				set = append(set, [2]string{"memory.swap.max", "0"})
			}
		case h.memory:
			// memsw (memory and swap) may not be below the memory limit.
			set = append(set, [2]string{"memory.limit_in_bytes", mem})
			if h.swap {
				set = append(set, [2]string{"memory.memsw.limit_in_bytes", mem})
			}
		}
		for _, kv := range set {
			if err := os.WriteFile(filepath.Join(d, kv[0]), []byte(kv[1]), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// attach moves pid into the session cgroup name, made by prepare, in each
// hierarchy. A cgroup removed since is prepared again with the limits l.
func (p *cgroupParent) attach(name string, l sandbox.Limits, pid int) error {
	for _, h := range p.hier {
		procs := filepath.Join(h.dir, name, "cgroup.procs")
		err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0)
		if errors.Is(err, fs.ErrNotExist) {
			if err = p.prepare(name, l); err == nil {
				err = os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// remove kills every process left in the session cgroup name, in each
// hierarchy, and removes it. It is idempotent.
func (p *cgroupParent) remove(name string) error {
	var errs []error
	for _, h := range p.hier {
		errs = append(errs, removeCgroup(filepath.Join(h.dir, name)))
	}
	return errors.Join(errs...)
}

// removeCgroup kills every process in the cgroup d and removes it.
func removeCgroup(d string) error {
	deadline := time.Now().Add(5 * time.Second)
	// Killed processes leave in a millisecond or so; poll often at first.
	pause := 250 * time.Microsecond
	wait := func() {
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
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
		wait()
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
		wait()
	}
}
