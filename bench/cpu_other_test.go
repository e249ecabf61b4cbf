//go:build !unix

package bench

import "time"

// cpuTime is unknown here; the CPU ratios come out as NaN.
func cpuTime() time.Duration { return 0 }
