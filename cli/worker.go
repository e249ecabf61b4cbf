package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
	"github.com/troupe-dev/troupe/workflows"
)

// startWorker starts a worker for graphs on taskQueue of namespace; the returned func
// stops it and releases its model and store.
func startWorker(ctx context.Context, c client.Client, namespace, taskQueue string, graphs []Graph, roots []string, stderr io.Writer) (func(), error) {
	store, err := openStore(ctx)
	if err != nil {
		return nil, err
	}
	m, release, err := modelFor(graphs, stderr)
	if err != nil {
		store.Close()
		return nil, err
	}
	sandboxes, backend, err := sandboxClients(roots, stderr)
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: graphList(graphs), Model: m, Store: store, Sandboxes: sandboxes, DefaultBackend: backend})
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	stop, err := r.StartWorkers(c, taskQueue, worker.Options{})
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	if dc, ok := sandboxes[docker.Backend].(*docker.Client); ok {
		// Containers whose workflow has closed (a worker killed before it
		// could stop them) are removed when a worker starts.
		if reaped, err := dc.Reap(ctx, workflows.KeepOpen(ctx, c, namespace)); err != nil {
			fmt.Fprintln(stderr, "troupe: reaping orphan sandboxes:", err)
		} else if len(reaped) > 0 {
			fmt.Fprintf(stderr, "troupe: removed %d orphan docker sandbox(es)\n", len(reaped))
		}
	}
	return func() { stop(); release(); store.Close() }, nil
}

func workerCommand(graphs []Graph) *cobra.Command {
	var taskQueue string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker for the graphs against TEMPORAL_ADDRESS",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := clientOptionsFromEnv()
			if err != nil {
				return err
			}
			if opts.HostPort == "" {
				return fmt.Errorf("TEMPORAL_ADDRESS is not set; use `troupe dev` for a local server")
			}
			c, err := client.DialContext(cmd.Context(), opts)
			if err != nil {
				return fmt.Errorf("connect to %s: %w", opts.HostPort, err)
			}
			defer c.Close()
			stop, err := startWorker(cmd.Context(), c, opts.Namespace, taskQueue, graphs, nil, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "troupe: worker on %s, task queue %s, graphs %v\n", opts.HostPort, taskQueue, names(graphs))
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&taskQueue, "task-queue", workflows.DefaultTaskQueue, "task queue to listen on")
	return cmd
}

func devCommand(graphs []Graph) *cobra.Command {
	var port, uiPort int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded Temporal server, its Web UI and a worker for the graphs",
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			srv, err := devserver.Start(cmd.Context(), devserver.Config{Port: port, UIPort: uiPort})
			if err != nil {
				return err
			}
			defer srv.Stop()
			c, err := client.DialContext(cmd.Context(), client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(), Logger: quietLogger()})
			if err != nil {
				return err
			}
			defer c.Close()
			stop, err := startWorker(cmd.Context(), c, srv.Namespace(), workflows.DefaultTaskQueue, graphs, nil, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "troupe: dev server up in %s\n  Temporal: %s (namespace %s)\n  Web UI:   %s\n  graphs:   %v\nexport TEMPORAL_ADDRESS=%s to run against it\n",
				time.Since(start).Round(time.Millisecond), srv.FrontendAddress(), srv.Namespace(), srv.UIAddress(), names(graphs), srv.FrontendAddress())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 7233, "Temporal frontend port")
	cmd.Flags().IntVar(&uiPort, "ui-port", 8233, "Web UI port (-1 for none)")
	return cmd
}

func names(graphs []Graph) []string {
	out := make([]string, len(graphs))
	for i, g := range graphs {
		out[i] = g.Graph.Name()
	}
	return out
}
