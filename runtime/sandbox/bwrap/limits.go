package bwrap

// How a session's limits are applied to a command, and the report of
// which of them are in force on this host (Client.Enforced).

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// rlimit is one resource limit set on a command's sandbox.
type rlimit struct {
	resource  int
	cur, max  uint64
	name      string
	clampedOf uint64 // The limit asked for, when the worker's own hard limit lowered it; 0 otherwise.
}

// workerHard are the worker's own hard limits, read once: a command's
// sandbox inherits them, and only a process with CAP_SYS_RESOURCE may
// raise a hard limit (so not a worker in a container, as a rule).
type workerHard map[int]uint64

var rlimitNames = map[int]string{
	unix.RLIMIT_CPU:   "RLIMIT_CPU",
	unix.RLIMIT_AS:    "RLIMIT_AS",
	unix.RLIMIT_NPROC: "RLIMIT_NPROC",
	unix.RLIMIT_CORE:  "RLIMIT_CORE",
	unix.RLIMIT_FSIZE: "RLIMIT_FSIZE",
}

func readWorkerHard() workerHard {
	h := workerHard{}
	for r := range rlimitNames {
		var l unix.Rlimit
		if unix.Getrlimit(r, &l) == nil {
			h[r] = l.Max
		} else {
			h[r] = unix.RLIM_INFINITY
		}
	}
	return h
}

// clamp is the limit resource at cur (soft) and max (hard), lowered to
// the worker's own hard limit where that is lower.
func (h workerHard) clamp(resource int, cur, max uint64) rlimit {
	r := rlimit{resource: resource, cur: cur, max: max, name: rlimitNames[resource]}
	if hard, ok := h[resource]; ok && hard != unix.RLIM_INFINITY && max > hard {
		r.clampedOf, r.max = max, hard
		r.cur = min(r.cur, hard)
	}
	return r
}

// rlimits are the resource limits of a command of a session with limits
// l: CPU seconds per process, address space per process (MemoryBytes
// itself when no memory cgroup bounds the session), processes per uid
// (the pids cgroup does it better), no core files, and, when workspaces
// are not bounded by a file system of their own, DiskBytes per file.
func (c *Client) rlimits(l sandbox.Limits) []rlimit {
	as := c.addressSpace
	if !c.cgroup.has(ctlMemory) {
		as = min(as, uint64(l.MemoryBytes))
	}
	out := []rlimit{
		c.hard.clamp(unix.RLIMIT_CPU, uint64(l.CPUSeconds), uint64(l.CPUSeconds)+1),
		c.hard.clamp(unix.RLIMIT_AS, as, as),
		c.hard.clamp(unix.RLIMIT_NPROC, uint64(l.PIDs), uint64(l.PIDs)),
		{resource: unix.RLIMIT_CORE, name: "RLIMIT_CORE"},
	}
	if !c.diskBounded() {
		out = append(out, c.hard.clamp(unix.RLIMIT_FSIZE, uint64(l.DiskBytes), uint64(l.DiskBytes)))
	}
	return out
}

// setRlimits sets rs on the process pid.
func setRlimits(pid int, rs []rlimit) error {
	for _, r := range rs {
		if err := unix.Prlimit(pid, r.resource, &unix.Rlimit{Cur: r.cur, Max: r.max}, nil); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return nil
}

// diskBounded reports whether workspaces get a file system of their own.
func (c *Client) diskBounded() bool { return c.disks != nil && c.disks.Err() == nil }

// diskBytes is the size of a session's file system: zero (none) when
// workspaces are not bounded here.
func (c *Client) diskBytes(l sandbox.Limits) int64 {
	if !c.diskBounded() {
		return 0
	}
	return l.DiskBytes
}

// Enforced says, for each of the session limits, what enforces it on this
// host and what is not in force, and why: a missing cgroup controller, no
// loop devices or no root for bounded workspaces, a bwrap without --size,
// a worker whose own hard rlimits are lower than the defaults.
func (c *Client) Enforced() []sandbox.LimitReport { return c.reports }

// LimitsMechanism says how the PIDs limit is enforced on this host: by a
// pids cgroup per session, or by RLIMIT_NPROC per command (and why no
// cgroup could be used). Enforced reports every limit.
func (c *Client) LimitsMechanism() string { return c.mech }

// Close drops the workspace file systems kept ready for new sessions,
// and waits for the teardown of stopped sessions' ones, which Stop leaves
// to the background. Live sessions are left as they are, and the client
// stays usable (without file systems made ahead).
func (c *Client) Close() error {
	err := c.disks.Close()
	host.WaitDetached()
	c.cgroup.close()
	return err
}

// report builds Enforced's answer; cgWhy says why there is no session
// cgroup at all, if there is none.
func (c *Client) report(cgWhy string) []sandbox.LimitReport {
	l := c.limits
	clamp := func(r rlimit) string {
		if r.clampedOf == 0 {
			return ""
		}
		return fmt.Sprintf(" (clamped from %d to the worker's own hard limit, %d)", r.clampedOf, r.max)
	}
	rl := map[int]rlimit{}
	for _, r := range c.rlimits(l) {
		rl[r.resource] = r
	}
	why := func(ctlWhy string) string {
		if c.cgroup == nil {
			return cgWhy
		}
		return ctlWhy
	}
	var pidsWhy, memWhy string
	if c.cgroup != nil {
		pidsWhy, memWhy = c.cgroup.pidsWhy, c.cgroup.memWhy
	}

	mem := sandbox.LimitReport{Limit: sandbox.LimitMemory, Default: l.MemoryBytes}
	if c.cgroup.has(ctlMemory) {
		mem.Mechanism = c.cgroup.mechanism(ctlMemory) + fmt.Sprintf("; and RLIMIT_AS of %s per process", sandbox.FormatBytes(int64(rl[unix.RLIMIT_AS].max))) + clamp(rl[unix.RLIMIT_AS])
	} else {
		mem.Mechanism = "RLIMIT_AS per process: MemoryBytes bounds each process's address space" + clamp(rl[unix.RLIMIT_AS])
		mem.NotInForce = "the memory of a session's processes together is not bounded: no memory cgroup: " + why(memWhy)
	}

	pids := sandbox.LimitReport{Limit: sandbox.LimitPIDs, Default: int64(l.PIDs)}
	if c.cgroup.has(ctlPids) {
		pids.Mechanism = c.cgroup.mechanism(ctlPids)
	} else {
		pids.Mechanism = "RLIMIT_NPROC per command" + clamp(rl[unix.RLIMIT_NPROC])
		pids.NotInForce = "processes are counted per uid, not per session, and "
		if os.Geteuid() == 0 {
			pids.NotInForce = "the kernel does not apply RLIMIT_NPROC to a root worker's sandboxes, and "
		}
		pids.NotInForce += "there is no pids cgroup: " + why(pidsWhy)
	}

	cpu := sandbox.LimitReport{Limit: sandbox.LimitCPU, Default: int64(l.CPUSeconds),
		Mechanism: "RLIMIT_CPU per process: SIGXCPU at the limit, SIGKILL a second later" + clamp(rl[unix.RLIMIT_CPU])}

	tmp := sandbox.LimitReport{Limit: sandbox.LimitTmp, Default: l.TmpBytes}
	if c.tmpSize {
		tmp.Mechanism = "a tmpfs of that size (bwrap --size)"
	} else {
		tmp.NotInForce = "this bwrap has no --size (bubblewrap 0.5 or later has): /tmp is a tmpfs of the kernel's default size, half of RAM"
	}
	if c.cgroup.has(ctlMemory) {
		tmp.Mechanism += "; its pages count as the session's memory"
		if !c.tmpSize {
			tmp.Mechanism = "the session's memory cgroup, as its pages count as the session's memory"
		}
	}

	disk := sandbox.LimitReport{Limit: sandbox.LimitDisk, Default: l.DiskBytes}
	if c.diskBounded() {
		disk.Mechanism = c.disks.Mechanism()
	} else {
		disk.Mechanism = "RLIMIT_FSIZE per file" + clamp(rl[unix.RLIMIT_FSIZE])
		reason := "disabled (Config.NoDisk)"
		if c.disks != nil {
			reason = c.disks.Err().Error()
		}
		disk.NotInForce = "the workspace as a whole is not bounded: no file system of its own: " + reason
	}
	return []sandbox.LimitReport{mem, pids, cpu, tmp, disk}
}
