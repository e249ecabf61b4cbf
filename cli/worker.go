package cli

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/codec"
	"github.com/troupe-dev/troupe/internal/periodic"
	"github.com/troupe-dev/troupe/runtime/devserver"
	"github.com/troupe-dev/troupe/telemetry"
	"github.com/troupe-dev/troupe/workflows"
	"github.com/troupe-dev/troupe/workflows/events"
	"github.com/troupe-dev/troupe/workflows/lease"
	"github.com/troupe-dev/troupe/workflows/retention"
)

// workerOptions are a worker's settings that its commands' flags give.
type workerOptions struct {
	// taskQueue is the shared task queue.
	taskQueue string
	// roots are host directories sandboxes may copy from (--allow-root,
	// and a run's host-path flags).
	roots []string
	// sandbox is the default sandbox backend (--sandbox, TROUPE_SANDBOX).
	sandbox string
	// sandboxQueue is the task queue of the worker's sandbox store
	// (--sandbox-queue, TROUPE_SANDBOX_QUEUE); empty for the default.
	sandboxQueue string
	// events, when set, gets the events of the worker's workflows as
	// they record them, for followers in this process.
	events *events.Bus
	// brief leaves out the sandboxes' limits from the start-up lines
	// (`troupe run` without --verbose: its progress is what matters).
	brief bool
	// deltaAddr is what --deltas-addr or TROUPE_DELTAS_ADDR said, when
	// they did: where the delta relay of before the live feed listened.
	// It does nothing but earn a warning.
	deltaAddr string
	// wait, for a command that uses the workers of taskQueue rather than
	// its own (`troupe run --task-queue`), waits for one to serve it
	// instead of failing with troupe.ErrNoWorker (--wait).
	wait bool
	// serve makes `troupe run` serve its run from a worker of its own
	// even against a Temporal server that others serve (--worker).
	serve bool
	// modelLimit limits the calls to every model endpoint the worker
	// calls, with the other workers of its queue
	// (--model-max-concurrent, --model-requests-per-second;
	// workflows.Config.ModelLimits); rateLimitWait bounds how long a
	// model call may stay rate-limited (--model-rate-limit-wait).
	modelLimit    agents.ModelLimit
	rateLimitWait time.Duration
}

// addModelLimitFlags adds the model endpoint's limits to a command that
// runs a long-lived worker.
func addModelLimitFlags(f *pflag.FlagSet, o *workerOptions) {
	f.IntVar(&o.modelLimit.MaxConcurrent, "model-max-concurrent", 0, "most model calls at once to each model endpoint (base URL and model), with every worker of the task queue (default $TROUPE_MODEL_MAX_CONCURRENT, else no limit)")
	f.IntVar(&o.modelLimit.Requests, "model-requests-per-second", 0, "most model calls started per second to each model endpoint, with every worker of the task queue (default $TROUPE_MODEL_REQUESTS_PER_SECOND, else no limit)")
	f.DurationVar(&o.rateLimitWait, "model-rate-limit-wait", 0, "how long one model call may stay rate-limited (429s, the limits above) before its agent fails (default $TROUPE_MODEL_RATE_LIMIT_WAIT, else 30m)")
}

// modelLimitsFromEnv fills the model limit flags not given from the
// environment, and rejects values that are not numbers.
func (o *workerOptions) modelLimitsFromEnv() error {
	for _, v := range []struct {
		env string
		n   *int
	}{{"TROUPE_MODEL_MAX_CONCURRENT", &o.modelLimit.MaxConcurrent}, {"TROUPE_MODEL_REQUESTS_PER_SECOND", &o.modelLimit.Requests}} {
		if s := os.Getenv(v.env); s != "" && *v.n == 0 {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a number of calls, 0 or more", v.env, s)
			}
			*v.n = n
		}
	}
	if s := os.Getenv("TROUPE_MODEL_RATE_LIMIT_WAIT"); s != "" && o.rateLimitWait == 0 {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("TROUPE_MODEL_RATE_LIMIT_WAIT=%q: want a duration such as 30m", s)
		}
		o.rateLimitWait = d
	}
	if err := o.modelLimit.Check(); err != nil {
		return fmt.Errorf("--model-max-concurrent, --model-requests-per-second: %w", err)
	}
	if o.rateLimitWait < 0 {
		return fmt.Errorf("--model-rate-limit-wait %s is negative", o.rateLimitWait)
	}
	return nil
}

// addDeltaFlag adds --deltas-addr, deprecated, to a command that runs a
// long-lived worker: live text goes through Temporal now, and a worker
// opens no port for it; a script that still passes the flag is told so
// (warnDeltaAddr), not refused.
func addDeltaFlag(f *pflag.FlagSet, o *workerOptions) {
	f.StringVar(&o.deltaAddr, "deltas-addr", os.Getenv("TROUPE_DELTAS_ADDR"), "ignored: live text goes through Temporal (the worker's live feed)")
	_ = f.MarkDeprecated("deltas-addr", "live text goes through Temporal (the worker's live feed); the worker opens no port for it")
}

// warnDeltaAddr says, when TROUPE_DELTAS_ADDR or --deltas-addr is set,
// that it does nothing any more.
func warnDeltaAddr(stderr io.Writer, o *workerOptions) {
	if o.deltaAddr != "" {
		fmt.Fprintf(stderr, "troupe: --deltas-addr / TROUPE_DELTAS_ADDR (%q) is ignored: live text goes through Temporal (the worker's live feed), and the worker opens no port for it\n", o.deltaAddr)
	}
}

// addSandboxFlags adds --sandbox, --sandbox-queue and --allow-root to a
// command that runs a worker.
func addSandboxFlags(f *pflag.FlagSet, o *workerOptions) {
	f.StringArrayVar(&o.roots, "allow-root", nil, "host directory sandboxes may copy from, e.g. repositories to review (repeatable; also $TROUPE_SANDBOX_ALLOWED_ROOTS)")
	f.StringVar(&o.sandbox, "sandbox", os.Getenv("TROUPE_SANDBOX"), "default sandbox backend: bwrap, docker, or local (unconfined: no isolation) (default $TROUPE_SANDBOX, else bwrap)")
	f.StringVar(&o.sandboxQueue, "sandbox-queue", os.Getenv("TROUPE_SANDBOX_QUEUE"), "task queue of this worker's sandbox store (default $TROUPE_SANDBOX_QUEUE, else the store's own, troupe-sandbox-<its identity>, kept in $TROUPE_HOME/sandboxes)")
}

// startWorker starts a worker for graphs in namespace, on c, a client
// dialled with the payload codec cdc (nil for none); the returned func
// stops it and releases its model and store.
func startWorker(ctx context.Context, c client.Client, cdc *codec.Codec, namespace string, o workerOptions, graphs []Graph, stderr io.Writer) (func(), error) {
	warnDeltaAddr(stderr, &o)
	taskQueue := o.taskQueue
	if err := o.modelLimitsFromEnv(); err != nil {
		return nil, err
	}
	var modelLimits map[string]agents.ModelLimit
	if o.modelLimit.Limits() {
		modelLimits = map[string]agents.ModelLimit{"": o.modelLimit}
		fmt.Fprintf(stderr, "troupe: model calls limited to %s per model endpoint, with every worker of task queue %s\n", o.modelLimit, taskQueue)
	}
	roots := make([]string, 0, len(o.roots))
	for _, r := range o.roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--allow-root %s: %w", r, err)
		}
		roots = append(roots, abs)
	}
	keepFor, on, err := blobRetention()
	if err != nil {
		return nil, err
	}
	store, storeURL, err := openStore(ctx)
	if err != nil {
		return nil, err
	}
	storeID := storeName(storeURL)
	keys := cdc.Fingerprint()
	m, modelID, release, err := modelFor(graphs, stderr)
	if err == nil {
		err = sameSetup(ctx, c, taskQueue, modelID, storeID, keys)
		if err != nil {
			release()
		}
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	// Repositories that clients send through the blob store are unpacked
	// under $TROUPE_HOME/repos, which sandboxes may copy from.
	repos, err := reposDir()
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	roots = append(roots, repos)
	sandboxes, backend, err := sandboxClients(graphs, o.sandbox, roots, stderr)
	// The store is $TROUPE_HOME/sandboxes, whichever backends answer now;
	// snapshots spool beside it, on disk.
	var spool, storeDir string
	if err == nil {
		spool, storeDir, err = sandboxStore()
	}
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	// A bus even with no follower in this process: the worker's live
	// feed serves what it carries to followers elsewhere.
	bus := o.events
	if bus == nil {
		bus = events.NewBus()
	}
	r, err := workflows.NewRunner(workflows.Config{Graphs: graphList(graphs), Events: bus, Model: m, Store: store,
		Sandboxes: sandboxes, DefaultBackend: backend, SandboxQueue: o.sandboxQueue, StoreDir: storeDir, SpoolDir: spool, RepoDir: repos,
		ModelLimits: modelLimits, ModelRateLimitWait: o.rateLimitWait})
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	id := r.Store()
	if id.Replaced != "" {
		fmt.Fprintf(stderr, "troupe: sandbox store %s: its identity %s was replaced by %s: %s; sandboxes of %s are not this worker's\n",
			storeDir, id.Replaced, id.ID, id.Why, id.Replaced)
	}
	fmt.Fprintf(stderr, "troupe: sandboxes: %s; sandbox queue %s (store %s)\n", describeSandboxes(sandboxes, backend), r.SandboxQueue(), cmp.Or(id.ID, "none"))
	if !o.brief {
		printLimits(stderr, sandboxes)
	}
	identity := codec.WithFingerprint(workerIdentity(modelID, storeID, telemetry.TraceEndpoint() != ""), keys)
	// A history this worker cannot open fails its workflow tasks again
	// and again, or its activities for good (troupe.PayloadKey): said
	// here once per key id.
	if cdc != nil {
		cdc.OnKeyError(func(ke *codec.KeyError) {
			fmt.Fprintf(stderr, "troupe: this worker cannot open a payload: %v (said once per key id; the runs whose payloads it is fail on this worker)\n", ke)
		})
	}
	stop, err := r.StartWorkers(c, taskQueue, worker.Options{Identity: identity})
	if err != nil {
		release()
		store.Close()
		return nil, err
	}
	// Up means seen: the commands that need a worker (needWorker) ask
	// the server, which lists a worker once its first poll came in.
	awaitPolling(ctx, c, taskQueue, identity)
	// Sandboxes whose workflow has closed (a worker killed before it could
	// stop them) are removed now and every lease.ReapInterval.
	stopReaping := lease.StartReaping(ctx, c, namespace, sandboxes, 0, func(removed map[string][]string, err error) {
		if err != nil {
			fmt.Fprintln(stderr, "troupe: reaping orphan sandboxes:", err)
		}
		for backend, ids := range removed {
			fmt.Fprintf(stderr, "troupe: removed %d orphan %s sandbox(es)\n", len(ids), backend)
		}
	})
	// Repositories no run opened for reposUnused go, now and every
	// lease.ReapInterval.
	stopRepos := periodic.Every(ctx, lease.ReapInterval, func(context.Context) {
		if n, err := r.Repos().Reap(reposUnused); err != nil {
			fmt.Fprintln(stderr, "troupe: removing unused repositories:", err)
		} else if n > 0 {
			fmt.Fprintf(stderr, "troupe: removed %d repositories no run used for %s\n", n, reposUnused)
		}
	})
	// The blob data of runs closed for TROUPE_BLOB_RETENTION goes, now
	// and every retention.SweepInterval.
	stopSweeping := func() {}
	if on {
		stopSweeping = retention.StartSweeping(ctx, c, store, keepFor, 0, func(swept []string, err error) {
			if err != nil {
				fmt.Fprintln(stderr, "troupe: sweeping the blob store:", err)
			}
			if len(swept) > 0 {
				fmt.Fprintf(stderr, "troupe: deleted the blob data of %d run(s) past retention\n", len(swept))
			}
		})
	}
	return func() {
		stopSweeping()
		stopRepos()
		stopReaping()
		stop()
		release()
		store.Close()
	}, nil
}

// awaitPolling returns once the server lists a poller of queue whose
// identity starts with the first word of identity, who the worker is
// (PID@HOST: a worker of this process; the fields after it are added to
// by the Runner), or after pollingWait: the worker runs either way, and a
// server that lists no pollers must not keep it from starting.
func awaitPolling(ctx context.Context, c client.Client, queue, identity string) {
	ctx, cancel := context.WithTimeout(ctx, pollingWait)
	defer cancel()
	who, _, _ := strings.Cut(identity, " ")
	for {
		pollers, err := freshPollers(ctx, c, queue)
		if err != nil {
			return
		}
		for _, p := range pollers {
			if id := p.GetIdentity(); id == who || strings.HasPrefix(id, who+" ") {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(workerPoll):
		}
	}
}

// pollingWait bounds awaitPolling.
const pollingWait = 10 * time.Second

// workerIdentity is a worker's identity on the Temporal server: its
// process and host, as the SDK's default says them, whether it exports
// traces (tracesOf, which warnUntraced reads), the model it calls and
// the blob store it keeps transcripts in (storeName), which sameSetup
// reads back. StartWorkers adds the workflow id of the process's live
// feed (" live=ID", troupe.LiveFeedOf).
func workerIdentity(model, store string, traces bool) string {
	host, _ := os.Hostname()
	state := "off"
	if traces {
		state = "on"
	}
	// The traces field goes with who the worker is, before " troupe
	// model=": a troupe of before it then reads the model and the store
	// as they were, and only a longer name for the worker.
	return fmt.Sprintf("%d@%s%s%s troupe model=%s blob=%s", os.Getpid(), host, tracesField, state, model, store)
}

// tracesField marks, in a troupe worker's identity, whether the worker
// exports traces: " traces=on" or " traces=off".
const tracesField = " traces="

// tracesOf reads what a worker's identity says of its traces: known is
// false when it says nothing (a worker of before the field, or one a
// program of its own started) or what tracesOf does not know; on is
// whether the worker exports them. rest is the identity without the
// field.
func tracesOf(identity string) (on, known bool, rest string) {
	i := strings.Index(identity, tracesField)
	if i < 0 {
		return false, false, identity
	}
	value, after, _ := strings.Cut(identity[i+len(tracesField):], " ")
	if after != "" {
		after = " " + after
	}
	// A value of a later troupe is no answer, but not part of who the
	// worker is either.
	return value == "on", value == "on" || value == "off", identity[:i] + after
}

// setupOf reads back what workerIdentity wrote: who the worker is, its
// model and its blob store ("" from a worker of before the store was in
// its identity). ok is false for an identity that is not a troupe
// worker's.
func setupOf(identity string) (who, model, store string, ok bool) {
	_, _, identity = codec.FingerprintOf(identity)
	_, identity = troupe.LiveFeedOf(identity)
	_, identity = troupe.StoreOf(identity)
	_, _, identity = tracesOf(identity)
	who, rest, ok := strings.Cut(identity, " troupe model=")
	if !ok {
		return "", "", "", false
	}
	// A model's name has spaces ("the responses API at URL"); the store
	// comes last.
	if i := strings.LastIndex(rest, " blob="); i >= 0 {
		return who, rest[:i], rest[i+len(" blob="):], true
	}
	return who, rest, "", true
}

// storeName names the blob store at url in a worker's identity, which
// anyone who can read the namespace sees: its scheme, host and path, no
// credentials or parameters, and a short hash of the whole URL, so that
// two stores that differ only there differ in name too.
func storeName(url string) string {
	if !strings.Contains(url, "://") {
		// A directory, as blob.Open takes it.
		if abs, err := filepath.Abs(url); err == nil {
			url = "file://" + abs
		}
	}
	sum := sha256.Sum256([]byte(url))
	shown := url
	if u, err := neturl.Parse(url); err == nil {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		shown = u.String()
	}
	return shown + "#" + hex.EncodeToString(sum[:4])
}

// sameSetup refuses to serve taskQueue when a troupe worker that is up
// serves it with another model, or keeps its blobs in another store: the
// runs on the queue would be answered by either, turn by turn (a `troupe
// run` with OPENAI_API_KEY beside an offline `troupe dev`, say), and a
// run's transcript written to one store would be looked for in the other
// ("blob: not found", for ever). It refuses too when a worker that is up
// states payload keys (codec.WithFingerprint) that do not agree with keys
// (codec.Fingerprint.Agree): one of the two could not read what the other
// seals. A worker of this process (one that ran before: none runs on the
// queue yet) does not count, nor one of this host whose process is gone,
// though the server lists them for a while.
func sameSetup(ctx context.Context, c client.Client, taskQueue, model, store string, keys codec.Fingerprint) error {
	pollers, err := freshPollers(ctx, c, taskQueue)
	if err != nil {
		return nil // Nothing to compare with: the server will say what is wrong.
	}
	host, _ := os.Hostname()
	for _, p := range pollers {
		who, _, _ := strings.Cut(p.GetIdentity(), " ")
		if pid, h, _ := strings.Cut(who, "@"); h == host || strings.HasPrefix(h, host+"@") {
			if n, err := strconv.Atoi(pid); err == nil && n == os.Getpid() {
				continue // Stopped (freshPollers leaves out those of other processes gone): its polls are still listed.
			}
		}
		theirKeys, known, _ := codec.FingerprintOf(p.GetIdentity())
		if _, theirs, theirStore, ok := setupOf(p.GetIdentity()); ok {
			if theirs != model {
				return fmt.Errorf("task queue %s is served by another troupe worker (%s) that calls %s; this one would call %s, "+
					"and each run's turns would go to either: give both the same model settings (OPENAI_API_KEY, OPENAI_BASE_URL, TROUPE_MODEL_API), "+
					"or stop the other first (a worker that has just stopped is listed for about a minute)", taskQueue, who, theirs, model)
			}
			if theirStore != "" && theirStore != store {
				return fmt.Errorf("task queue %s is served by another troupe worker (%s) that keeps its blobs in %s; this one would keep them in %s, "+
					"and a run moving between the two would not find its transcript: give both the same store (TROUPE_BLOB_URL, or the same TROUPE_HOME), "+
					"or stop the other first (a worker that has just stopped is listed for about a minute)", taskQueue, who, theirStore, store)
			}
		}
		if !known {
			continue // A worker of before fingerprints: nothing to compare with.
		}
		if err := keys.Agree(theirKeys); err != nil {
			return &Error{Type: troupe.ErrPayloadKey, Message: fmt.Sprintf("task queue %s is served by another troupe worker (%s) whose payload keys (%s) do not agree with this one's (%s): %v; "+
				"give every worker of the queue the same keys (%s, %s, %s; to rotate, add the new key to every worker before any makes it active), "+
				"or stop the other first (a worker that has just stopped is listed for about a minute)",
				taskQueue, who, theirKeys, keys, err, codec.EnvKeyFile, codec.EnvKeys, codec.EnvKeyID)}
		}
	}
	return nil
}

// blobRetention reads TROUPE_BLOB_RETENTION: how long the blob data of a
// closed run is kept (a Go duration such as 168h; default
// retention.Default), or "off" to keep it forever.
func blobRetention() (time.Duration, bool, error) {
	v := os.Getenv("TROUPE_BLOB_RETENTION")
	switch v {
	case "":
		return retention.Default, true, nil
	case "off":
		return 0, false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("TROUPE_BLOB_RETENTION=%q: want a duration such as 168h, or off (the blob store is not swept)", v)
	}
	return d, true, nil
}

func workerCommand(graphs []Graph) *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker for the graphs against a Temporal server (--address, --profile, TEMPORAL_ADDRESS)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := resolveConn(connectionOf(cmd))
			if err != nil {
				return err
			}
			if !cluster(res) {
				return noServerNamed(res)
			}
			opts := res.Options
			opts.Logger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
			opts, stopTelemetry, err := withTelemetry(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer stopTelemetry()
			c, err := client.DialContext(cmd.Context(), opts)
			if err != nil {
				return dialError(&conn{res: res}, opts.HostPort, err)
			}
			defer c.Close()
			stop, err := startWorker(cmd.Context(), c, res.Codec, opts.Namespace, o, graphs, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "troupe: worker on %s, task queue %s, graphs %v\n", opts.HostPort, o.taskQueue, names(graphs))
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&o.taskQueue, "task-queue", troupe.DefaultTaskQueue, "task queue to listen on")
	addSandboxFlags(cmd.Flags(), &o)
	addDeltaFlag(cmd.Flags(), &o)
	addModelLimitFlags(cmd.Flags(), &o)
	addConnFlags(cmd.Flags())
	return cmd
}

func devCommand(graphs []Graph) *cobra.Command {
	var port, uiPort, codecPort int
	var noWorker bool
	o := workerOptions{taskQueue: troupe.DefaultTaskQueue}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded Temporal server, its Web UI and a worker for the graphs",
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			cdc, err := payloadCodec()
			if err != nil {
				return err
			}
			var codecSrv *devCodec
			if uiPort >= 0 {
				// The UI decodes payloads through a codec server of
				// this process, when there are keys to decode with.
				if codecSrv, err = listenDevCodec(cdc, codecPort); err != nil {
					return err
				}
				defer codecSrv.close(cmd.ErrOrStderr())
			}
			srv, err := devserver.Start(cmd.Context(), devserver.Config{Port: port, UIPort: uiPort, CodecEndpoint: codecSrv.endpoint()})
			if errors.Is(err, devserver.ErrDatabaseInUse) {
				if dir, derr := home(); derr == nil {
					if info, rerr := devserver.Running(dir); rerr == nil {
						return fmt.Errorf("another troupe command (pid %d) runs the Temporal server of %s at %s: "+
							"start troupe dev once it ends, or serve that server with TEMPORAL_ADDRESS=%s troupe worker: %w", info.PID, dir, info.Address, info.Address, err)
					}
				}
			}
			if err != nil {
				return err
			}
			defer srv.Stop()
			codecSrv.serve(cdc, srv.UIAddress())
			opts := client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(), Logger: quietLogger()}
			cdc.Apply(&opts)
			opts, stopTelemetry, err := withTelemetry(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer stopTelemetry()
			c, err := client.DialContext(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer c.Close()
			served := fmt.Sprint(names(graphs))
			if noWorker {
				served = "none: no worker (--no-worker); run `troupe worker` against it"
			} else {
				stop, err := startWorker(cmd.Context(), c, cdc, srv.Namespace(), o, graphs, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer stop()
			}
			payloads := "plain (no TROUPE_CODEC_KEYS or TROUPE_CODEC_KEY_FILE)"
			if cdc.ActiveKey() != "" {
				payloads = "encrypted with key " + cdc.ActiveKey()
				if e := codecSrv.endpoint(); e != "" {
					payloads += "; the Web UI decodes them through " + e
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "troupe: dev server up in %s\n  Temporal: %s (namespace %s)\n  Web UI:   %s\n  payloads: %s\n  graphs:   %s\nexport TEMPORAL_ADDRESS=%s to run against it\n",
				time.Since(start).Round(time.Millisecond), srv.FrontendAddress(), srv.Namespace(), srv.UIAddress(), payloads, served, srv.FrontendAddress())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 7233, "Temporal frontend port")
	cmd.Flags().IntVar(&uiPort, "ui-port", 8233, "Web UI port (-1 for none)")
	cmd.Flags().IntVar(&codecPort, "codec-port", 8234, "port of the codec server the Web UI decodes payloads through, when TROUPE_CODEC_* gives keys (0: any free port, -1 for none)")
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "run the server and its Web UI only, with no worker")
	addSandboxFlags(cmd.Flags(), &o)
	addDeltaFlag(cmd.Flags(), &o)
	addModelLimitFlags(cmd.Flags(), &o)
	return cmd
}

func names(graphs []Graph) []string {
	out := make([]string, len(graphs))
	for i, g := range graphs {
		out[i] = g.Graph.Name()
	}
	return out
}

// sandboxStore returns the directory, made if missing, where this
// worker's snapshots spool, and its sandbox store's directory,
// $TROUPE_HOME/sandboxes, which holds every backend's root and the
// store's identity (workflows.Config.StoreDir), whichever backends answer
// now.
// reposUnused is how long a worker keeps a repository that a client sent
// (gitbundle) once no run opens it.
const reposUnused = 24 * time.Hour

// reposDir is where a worker unpacks the repositories clients send:
// $TROUPE_HOME/repos.
func reposDir() (string, error) {
	dir, err := home()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "repos")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

func sandboxStore() (spool, store string, err error) {
	dir, err := home()
	if err != nil {
		return "", "", err
	}
	spool = filepath.Join(dir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return "", "", err
	}
	return spool, filepath.Join(dir, "sandboxes"), nil
}
