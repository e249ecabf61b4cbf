package sandbox_test

import (
	"encoding/json"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestLimitReport(t *testing.T) {
	for _, tc := range []struct {
		r    sandbox.LimitReport
		want string
	}{
		{sandbox.LimitReport{Limit: sandbox.LimitMemory, Default: 2 << 30, Mechanism: "a memory cgroup"}, "memory (2 GiB): a memory cgroup"},
		{sandbox.LimitReport{Limit: sandbox.LimitPIDs, Default: 512, Mechanism: "RLIMIT_NPROC", NotInForce: "root"}, "pids (512): RLIMIT_NPROC; not in force: root"},
		{sandbox.LimitReport{Limit: sandbox.LimitCPU, Default: 600, Mechanism: "RLIMIT_CPU"}, "cpu (600 s): RLIMIT_CPU"},
		{sandbox.LimitReport{Limit: sandbox.LimitDisk, NotInForce: "no loop devices"}, "disk: not in force: no loop devices"},
		{sandbox.LimitReport{Limit: sandbox.LimitTmp, Default: 1<<20 + 1, Mechanism: "tmpfs"}, "tmp (1048577 bytes): tmpfs"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
		if tc.r.InForce() != (tc.r.NotInForce == "") {
			t.Errorf("%v: InForce() = %v", tc.r, tc.r.InForce())
		}
	}
	// The JSON that goes into sandbox events.
	b, err := json.Marshal(sandbox.LimitReport{Limit: sandbox.LimitDisk, Default: 8 << 30, Mechanism: "loop", NotInForce: ""})
	if err != nil || string(b) != `{"limit":"disk","default":8589934592,"mechanism":"loop"}` {
		t.Errorf("JSON: %s, %v", b, err)
	}
}

func TestLimitsOr(t *testing.T) {
	def := sandbox.Limits{PIDs: 1, MemoryBytes: 2, CPUSeconds: 3, TmpBytes: 4, DiskBytes: 5}
	if got := (sandbox.Limits{PIDs: 9, DiskBytes: 7}).Or(def); got != (sandbox.Limits{PIDs: 9, MemoryBytes: 2, CPUSeconds: 3, TmpBytes: 4, DiskBytes: 7}) {
		t.Errorf("Or = %+v", got)
	}
}
