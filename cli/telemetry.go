package cli

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/telemetry"
)

// withTelemetry adds to opts the OpenTelemetry traces and metrics that the
// standard OTEL_EXPORTER_OTLP_* variables ask for (package telemetry):
// the client's, and those of every worker made from it. Without them it
// returns opts as they are. The returned func sends what is still
// buffered, for at most 5 s, and stops them.
func withTelemetry(ctx context.Context, opts client.Options) (client.Options, func(), error) {
	tel, err := telemetry.New(ctx, telemetry.Config{})
	if err != nil {
		return opts, func() {}, err
	}
	return tel.ClientOptions(opts), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	}, nil
}
