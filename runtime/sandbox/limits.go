package sandbox

// How a backend bounds a session's resources on this host, and which of
// its Limits it cannot bound here. A missing kernel feature (a cgroup
// controller, loop devices) or privilege does not stop a backend from
// working: it degrades, and says so through LimitReporter, so that the
// worker's start-up lines and the sandbox_provisioned event tell which
// limits are in force.

import (
	"fmt"
	"strings"
)

// Names of the limits in a LimitReport: one per field of Limits.
const (
	LimitMemory = "memory" // Limits.MemoryBytes
	LimitPIDs   = "pids"   // Limits.PIDs
	LimitCPU    = "cpu"    // Limits.CPUSeconds
	LimitTmp    = "tmp"    // Limits.TmpBytes
	LimitDisk   = "disk"   // Limits.DiskBytes
)

// LimitReport says how one limit is enforced on this host. A limit is in
// force when NotInForce is empty; a degraded one has both fields: a
// weaker Mechanism stands in, and NotInForce says what is not bounded and
// why.
type LimitReport struct {
	// Limit is one of LimitMemory, LimitPIDs, LimitCPU, LimitTmp,
	// LimitDisk.
	Limit string `json:"limit"`
	// Default is the limit of a session that does not set it: bytes,
	// processes or CPU seconds; zero when the client has none.
	Default int64 `json:"default,omitempty"`
	// Mechanism is what enforces it, e.g. "cgroup v1 memory.limit_in_bytes
	// per session"; empty when nothing does.
	Mechanism string `json:"mechanism,omitempty"`
	// NotInForce says what of the limit is not enforced here and why;
	// empty when it is in force.
	NotInForce string `json:"not_in_force,omitempty"`
}

// InForce reports whether the limit is wholly enforced.
func (r LimitReport) InForce() bool { return r.NotInForce == "" }

// String is "limit (default): mechanism", with "; not in force: why" when
// degraded.
func (r LimitReport) String() string {
	s := r.Limit
	switch {
	case r.Default == 0:
	case r.Limit == LimitPIDs:
		s += fmt.Sprintf(" (%d)", r.Default)
	case r.Limit == LimitCPU:
		s += fmt.Sprintf(" (%d s)", r.Default)
	default:
		s += " (" + FormatBytes(r.Default) + ")"
	}
	s += ": "
	switch {
	case r.Mechanism == "":
		return s + "not in force: " + r.NotInForce
	case r.NotInForce == "":
		return s + r.Mechanism
	}
	return s + r.Mechanism + "; not in force: " + r.NotInForce
}

// LimitReporter is a Client that says how it enforces each of Limits'
// fields on this host (bwrap and docker are; local bounds nothing). The
// answer is fixed when the client is made.
type LimitReporter interface {
	Enforced() []LimitReport
}

// FormatLimits is reports as lines for a worker's start-up output, each
// indented by indent.
func FormatLimits(reports []LimitReport, indent string) string {
	var b strings.Builder
	for _, r := range reports {
		fmt.Fprintf(&b, "%s%s\n", indent, r)
	}
	return b.String()
}

// NotInForce returns the reports of limits that are not wholly enforced.
func NotInForce(reports []LimitReport) []LimitReport {
	var out []LimitReport
	for _, r := range reports {
		if !r.InForce() {
			out = append(out, r)
		}
	}
	return out
}

// FormatBytes is n in the largest binary unit that divides it ("256 MiB"),
// for limit reports.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Or returns l with its zero fields taken from def.
func (l Limits) Or(def Limits) Limits {
	if l.PIDs <= 0 {
		l.PIDs = def.PIDs
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = def.MemoryBytes
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = def.CPUSeconds
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = def.TmpBytes
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = def.DiskBytes
	}
	return l
}
