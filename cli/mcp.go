package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/workflows/events"
)

// envMCPToken is the bearer token of `troupe mcp serve --http` when
// --token is not given.
const envMCPToken = "TROUPE_MCP_TOKEN"

// mcpCommand is `troupe mcp`: the graphs' exposed agents over MCP.
func mcpCommand(graphs []Graph) *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Model Context Protocol: serve the graphs' exposed agents as tools"}
	var (
		graphNames                      []string
		httpAddr, token, queue          string
		useStdio, stateless, insecureNA bool
		wo                              workerOptions
	)
	serve := &cobra.Command{
		Use:   "serve [--graph NAME]... [--stdio | --http ADDR [--stateless] [--token TOKEN | --insecure-no-auth]]",
		Short: "Serve the exposed agents as MCP tools; each call is a durable run",
		Long: `Serve the graphs' exposed agents as tools of an MCP server. Each call starts a
durable run (an OrchestratorWorkflow); troupe_run_status and troupe_run_result
read runs by id, also after a dropped connection. Each agent tool X also has a
session tool X_session ({message, session_id?}): a conversation in a durable
session, continued by its session_id from any connection.

Transports:
  --stdio (the default)  one session on stdin/stdout, for clients that launch
                         the server; diagnostics go to stderr
  --http ADDR            streamable HTTP at http://ADDR/mcp, stateful (sessions)
                         unless --stateless; --token (or $` + envMCPToken + `)
                         requires "Authorization: Bearer TOKEN". Requests on a
                         loopback address with another Host are refused. An
                         ADDR that is not loopback needs a token, or
                         --insecure-no-auth to serve anyone who can connect.

Temporal: --address, --namespace, --profile, TEMPORAL_ADDRESS and the other
TEMPORAL_* variables and profiles as for troupe worker; with none naming a
server, an embedded one keeps its state in TROUPE_HOME. Without --task-queue a worker
for the graphs runs in this process, on a queue named after them, so a
restarted server picks up the runs of the one before. --allow-root adds host
paths that sandboxes may copy from (e.g. repositories to review). With
--task-queue, a repository on this host that a call names (codereview's repo)
is sent to the workers through their blob store (TROUPE_BLOB_URL), as troupe
run sends one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if useStdio && httpAddr != "" {
				return errors.New("--stdio and --http exclude each other")
			}
			if httpAddr == "" && (stateless || token != "" || insecureNA) {
				return errors.New("--stateless, --token and --insecure-no-auth apply to --http")
			}
			if httpAddr != "" && token == "" {
				token = os.Getenv(envMCPToken)
			}
			if httpAddr != "" {
				warning, err := checkMCPHTTPAuth(httpAddr, token, insecureNA)
				if err != nil {
					return err
				}
				if warning != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "troupe: warning:", warning)
				}
			}
			served := graphs
			if len(graphNames) > 0 {
				served = nil
				for _, name := range graphNames {
					g, err := findGraph(graphs, name)
					if err != nil {
						return err
					}
					served = append(served, g)
				}
			}
			res, err := resolveConn(connectionOf(cmd))
			if err != nil {
				return err
			}
			return serveMCP(cmd.Context(), mcpServeOptions{
				conn: res, graphs: graphs, served: served, queue: queue,
				httpAddr: httpAddr, stateless: stateless, token: token, worker: wo,
			}, cmd.ErrOrStderr())
		},
	}
	f := serve.Flags()
	f.StringArrayVar(&graphNames, "graph", nil, "graph whose exposed agents to serve (repeatable; default: all)")
	f.BoolVar(&useStdio, "stdio", false, "serve one session on stdin/stdout (the default)")
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on ADDR (e.g. 127.0.0.1:8090), at /mcp")
	f.BoolVar(&stateless, "stateless", false, "with --http: no sessions, each request on its own")
	f.StringVar(&token, "token", "", "with --http: bearer token clients must send (default $"+envMCPToken+")")
	f.BoolVar(&insecureNA, "insecure-no-auth", false, "with --http on an address that is not loopback: serve without a token")
	f.StringVar(&queue, "task-queue", "", "task queue of running workers (against a Temporal server that --address, TEMPORAL_ADDRESS or a profile names; default: run a worker in this process)")
	addSandboxFlags(f, &wo)
	addConnFlags(f)
	cmd.AddCommand(serve)
	return cmd
}

type mcpServeOptions struct {
	// conn is the Temporal server to use.
	conn           troupeclient.Resolved
	graphs, served []Graph
	queue          string
	httpAddr       string
	stateless      bool
	token          string
	// worker holds the sandbox flags of the worker serveMCP runs.
	worker workerOptions
}

func serveMCP(ctx context.Context, o mcpServeOptions, stderr io.Writer) error {
	if !cluster(o.conn) && o.queue != "" {
		return usage(errors.New("--task-queue needs a Temporal server (--address, TEMPORAL_ADDRESS or a profile): the embedded server has no other workers"))
	}
	cn, err := dialTemporal(ctx, o.conn, nil, stderr)
	if err != nil {
		return err
	}
	defer cn.close(stderr)
	c, namespace := cn.c, cn.namespace
	ownWorker := o.queue == ""
	if ownWorker {
		// One queue per set of graphs, the same after a restart: the
		// worker of the next server picks up the runs of this one. Its
		// events reach the calls' progress as they are recorded.
		o.queue = "troupe-mcp-" + strings.Join(names(o.graphs), "-")
		o.worker.taskQueue = o.queue
		o.worker.events = events.NewBus()
		stop, err := startWorker(ctx, c, cn.res.Codec, namespace, o.worker, o.graphs, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg := server.Config{
		Client: c, TaskQueue: o.queue, Graphs: graphList(o.served), Events: o.worker.events,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Inputs: workersStore{cn, o.queue}, DataConverter: o.conn.Options.DataConverter,
	}
	if !ownWorker {
		// The workers are elsewhere: a call says at once when none serves
		// the queue, rather than wait for one.
		cfg.Workers = func(ctx context.Context) error {
			if err := needWorker(ctx, cn, o.queue, false, io.Discard); err != nil {
				return noWorker(cn, o.queue, "")
			}
			return nil
		}
		if err := cfg.Workers(ctx); err != nil {
			fmt.Fprintf(stderr, "troupe: %v; until one does, calls answer so\n", err)
		}
		// Nor may they see this disk: a repository on it that a call
		// names goes to them through their blob store, under the run or
		// session the call starts.
		cfg.PrepareVars = repoSender(cn, o.graphs, o.queue, mcpRepoInstead, stderr)
	}
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	tools := strings.Join(s.Tools(), ", ")
	if tools == "" {
		tools = "none: no agent of " + strings.Join(names(o.served), ", ") + " is exposed"
	}
	if o.httpAddr == "" {
		fmt.Fprintf(stderr, "troupe: serving MCP on stdio; tools: %s; task queue %s\n", tools, o.queue)
		return s.Serve(ctx, &mcp.StdioTransport{})
	}
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("serve MCP over HTTP: %w", err)
	}
	hs := &http.Server{Handler: s.HTTPHandler(server.HTTPOptions{Stateless: o.stateless, Token: o.token}), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	mode := "stateful"
	if o.stateless {
		mode = "stateless"
	}
	auth := "no token"
	if o.token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(stderr, "troupe: serving MCP at %s (%s, %s); tools: %s; task queue %s\n", httpURL(ln.Addr()), mode, auth, tools, o.queue)
	select {
	case err := <-served:
		return fmt.Errorf("serve MCP at %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// Calls waiting on runs answer that their runs go on, then the
	// server stops; the runs keep running in Temporal.
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// checkMCPHTTPAuth refuses to serve MCP over HTTP without a token on an
// address others can reach: go-sdk's DNS-rebinding check guards loopback
// addresses only, and every call runs agents (and spends model tokens).
// With insecure the refusal becomes the warning returned.
func checkMCPHTTPAuth(addr, token string, insecure bool) (warning string, err error) {
	if token != "" || loopbackListenAddr(addr) {
		return "", nil
	}
	if !insecure {
		return "", fmt.Errorf("--http %s is not a loopback address: set --token (or $%s) so that only clients with it get in, "+
			"or pass --insecure-no-auth to serve anyone who can connect", addr, envMCPToken)
	}
	return fmt.Sprintf("serving MCP on %s without a token (--insecure-no-auth): anyone who can connect can run the agents", addr), nil
}

// loopbackListenAddr reports whether a listen address (host:port) binds
// loopback only: localhost or a loopback IP. An empty host binds every
// interface.
func loopbackListenAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpURL is the MCP endpoint's URL for a listener's address; an
// unspecified address is shown as loopback.
func httpURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + server.Path
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + server.Path
}
