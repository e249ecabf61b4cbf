package devserver_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/troupe-dev/troupe/runtime/devserver"
)

// Start an in-memory server without the Web UI, as a test would, and talk to it with the
// Temporal SDK. `troupe dev` uses the zero Config instead: a file under ~/.troupe and the UI.
func ExampleStart() {
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Config{InMemory: true, UIPort: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	c, err := sdkclient.Dial(sdkclient.Options{
		HostPort:  srv.FrontendAddress(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ns, err := c.WorkflowService().DescribeNamespace(ctx,
		&workflowservice.DescribeNamespaceRequest{Namespace: srv.Namespace()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("namespace:", ns.GetNamespaceInfo().GetName())
	// Output: namespace: default
}
