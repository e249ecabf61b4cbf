package runtime

import (
	"fmt"
	"testing"
)

// segmentKey names segments as fmt's %06d does.
func TestSegmentKey(t *testing.T) {
	for _, i := range []int{-12, -1, 0, 1, 9, 10, 99999, 100000, 999999, 1000000, 12345678} {
		if got, want := segmentKey("transcripts/run-1", i), fmt.Sprintf("%s/%06d.json", "transcripts/run-1", i); got != want {
			t.Errorf("segmentKey(%d) = %s, want %s", i, got, want)
		}
	}
}
