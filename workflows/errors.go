package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
)

func nonRetryable(typ, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), typ, nil)
}

// payloadLimit bounds every payload this package builds. Temporal rejects
// payloads of 2 MiB; staying far below keeps histories healthy.
const payloadLimit = 512 << 10

func checkPayload(what string, n int) error {
	if n > payloadLimit {
		return nonRetryable(troupe.ErrPayloadTooLarge,
			"%s is %d bytes, over Troupe's %d-byte bound for one Temporal payload; return less, or store it and pass a reference", what, n, payloadLimit)
	}
	return nil
}
