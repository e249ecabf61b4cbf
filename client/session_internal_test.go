package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
)

// TestTakenLater: an update of the session manager is sent again (the
// same update id) when nothing says it failed for good: the manager
// continuing as new, or the server timing it out or turning it away
// while busy, also inside an update-with-start's error (the failure seen
// under a burst of 1,000 creates: "failed workflow update: context
// deadline exceeded", a DeadlineExceeded of the server's). A refusal of
// the manager's is final.
func TestTakenLater(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"manager continuing", temporal.NewApplicationError("continuing", troupe.ErrManagerContinuing), true},
		{"client's patience", fmt.Errorf("wait: %w", context.DeadlineExceeded), true},
		{"server's deadline in an update-with-start", fmt.Errorf("failed workflow update: %w", serviceerror.NewDeadlineExceeded("context deadline exceeded")), true},
		{"too many updates in flight", fmt.Errorf("failed workflow update: %w",
			serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "limit on number of concurrent in-flight updates")), true},
		{"unknown graph", temporal.NewNonRetryableApplicationError("no graph", troupe.ErrUnknownGraph, nil), false},
		{"bad command", errors.New("a session needs a graph"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := takenLater(tc.err); got != tc.want {
				t.Errorf("takenLater(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
