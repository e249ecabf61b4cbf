package gatetest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/workflows/gate/gatetest"
)

// An agent with no gate passes, as the suite's baseline: the harness
// itself holds what Passes asserts.
func TestNoGatePasses(t *testing.T) {
	gatetest.Run(t, gatetest.Suite{Passes: &gatetest.Case{}})
}
