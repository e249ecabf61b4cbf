package docker

// Which of a session's limits are in force with this engine and host
// (Client.Enforced), and the workspace's own file system.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// workspaceDisks returns the Disks of Root, probed on first use (so New
// stays cheap); nil with Config.NoDisk.
func (c *Client) workspaceDisks() *host.Disks {
	c.disksOnce.Do(func() {
		if !c.cfg.NoDisk {
			c.disks = host.NewDisks(c.root)
		}
	})
	return c.disks
}

// diskBytes is the size of the file system of a workspace with limits l:
// zero (none) where workspaces cannot be bounded.
func (c *Client) diskBytes(l sandbox.Limits) int64 {
	if d := c.workspaceDisks(); d == nil || d.Err() != nil {
		return 0
	}
	if l.DiskBytes > 0 {
		return l.DiskBytes
	}
	return DefaultDiskBytes
}

// Enforced says, for each of the session limits, what enforces it and
// what is not in force, and why: the engine's own report of its cgroup
// support (asked once, the first time), and whether workspaces can have a
// file system of their own on this host.
func (c *Client) Enforced() []sandbox.LimitReport {
	c.reportsOnce.Do(func() { c.reports = c.report() })
	return c.reports
}

func (c *Client) report() []sandbox.LimitReport {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, infoErr := c.api.Info(ctx)
	engine := func(supported bool, what string) string {
		switch {
		case infoErr != nil:
			return "unknown: the engine did not say whether it supports " + what + ": " + infoErr.Error()
		case !supported:
			return "the engine reports no " + what + " support (a cgroup controller missing from the kernel or not delegated)"
		}
		return ""
	}
	cgroup := "cgroup"
	if infoErr == nil && info.CgroupVersion != "" {
		cgroup += " v" + info.CgroupVersion
	}

	mem := sandbox.LimitReport{Limit: sandbox.LimitMemory, Default: DefaultMemoryBytes,
		Mechanism:  "the container's " + cgroup + " memory limit (HostConfig.Memory), no swap on top",
		NotInForce: engine(info.MemoryLimit, "memory limit")}
	if mem.NotInForce == "" && infoErr == nil && !info.SwapLimit && hostHasSwap() {
		mem.NotInForce = "swap on top of the limit is not bounded: the engine reports no swap limit support (the kernel runs without swap accounting)"
	}
	pids := sandbox.LimitReport{Limit: sandbox.LimitPIDs, Default: DefaultPIDs,
		Mechanism:  "the container's " + cgroup + " pids limit (HostConfig.PidsLimit)",
		NotInForce: engine(info.PidsLimit, "pids limit")}
	cpu := sandbox.LimitReport{Limit: sandbox.LimitCPU,
		Mechanism: fmt.Sprintf("RLIMIT_CPU per command (ulimit -t) when a session sets CPUSeconds, none by default; and a CPU share of %g CPUs per container", c.cfg.CPUs)}
	tmp := sandbox.LimitReport{Limit: sandbox.LimitTmp, Default: DefaultTmpfsBytes,
		Mechanism: "a tmpfs of that size (HostConfig.Tmpfs size=); its pages count as the container's memory"}
	disk := sandbox.LimitReport{Limit: sandbox.LimitDisk, Default: DefaultDiskBytes}
	switch d := c.workspaceDisks(); {
	case d == nil:
		disk.Default, disk.NotInForce = 0, "the workspace is not bounded: disabled (Config.NoDisk)"
	case d.Err() != nil:
		disk.Default, disk.NotInForce = 0, "the workspace is not bounded: no file system of its own: "+d.Err().Error()
	default:
		disk.Mechanism = d.Mechanism() + ", bind-mounted into the container"
	}
	return []sandbox.LimitReport{mem, pids, cpu, tmp, disk}
}

// hostHasSwap reports whether this host has swap space.
func hostHasSwap() bool {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return true
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "SwapTotal:"); ok {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")) != "0"
		}
	}
	return true
}
