package devserver

// This file holds the public API (Config, Start, Server) and the start sequence. The server's
// static configuration is in config.go, the Web UI in ui.go, port handling in ports.go, the
// database lock in lock_unix.go and the log adapter in log.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporal"
)

// DBFile is the name of the SQLite database file inside [Config.Dir].
const DBFile = "temporal.db"

// ErrPortInUse is returned, wrapped, by [Start] when a port given in the [Config] is already
// taken on its IP (or, rarely, when a port Start picked is taken before the Web UI binds it).
// Callers can test for it with errors.Is, for example to tell the user that another dev
// server is running.
var ErrPortInUse = errors.New("port in use")

// ErrDatabaseInUse is returned, wrapped, by [Start] when another running server, in this
// process or another, uses the same database file. Only one server may use a file at a time.
var ErrDatabaseInUse = errors.New("database in use by another server")

// defaultStartTimeout bounds the wait for the frontend when Start's context has no deadline.
const defaultStartTimeout = 60 * time.Second

// Config configures [Start]. Its zero value starts a file-backed server in $TROUPE_HOME (or
// ~/.troupe) with the "default" namespace, the Web UI, and free loopback ports.
type Config struct {
	// Dir is the directory that holds the SQLite database file (see [DBFile]). It is created
	// if missing. When empty it is $TROUPE_HOME, or ~/.troupe when that is unset. Dir is
	// ignored when InMemory is true.
	Dir string

	// InMemory keeps the database in memory instead of in a file, so nothing survives Stop.
	// It is meant for tests.
	InMemory bool

	// Namespace is the Temporal namespace to register, if it is not registered already, and
	// to wait for. When empty it is "default".
	Namespace string

	// IP is the address every service and the UI listen on. When empty it is 127.0.0.1.
	// The server has no authentication, so keep it on a loopback address.
	IP string

	// Port is the frontend gRPC port, the one clients dial. Zero picks a free port.
	Port int

	// UIPort is the Web UI's HTTP port. Zero picks a free port; a negative value (use -1)
	// runs no UI.
	UIPort int

	// CodecEndpoint is the URL of the codec server (troupe codec-server,
	// or one of the SDK's NewPayloadCodecHTTPHandler) that the Web UI
	// calls to decode payloads, such as "http://127.0.0.1:8234". The UI's
	// pages call it from the user's browser, so it must allow the UI's
	// origin (UIAddress). Empty: the UI shows payloads as they are stored.
	CodecEndpoint string

	// Logger receives the server's logs. The server logs a lot at Info level, so pass a
	// logger with a Warn or Error level unless you are debugging the server. While Stop
	// runs, the services report the calls that Stop cuts short as errors; those messages
	// are logged at Debug level instead. When nil the logs are discarded.
	Logger *slog.Logger

	// DynamicConfig holds dynamic-config overrides, by key (for example
	// "history.transferProcessorMaxPollRPS"), that are applied over this package's defaults.
	// Values have the types a dynamic-config YAML file would give them: bool, int, float64,
	// string, or time.Duration for durations. Keys are case-insensitive.
	//
	// The defaults raise the history queues' poll rates to 1000/s (the defaults of 20/s add
	// tens of milliseconds to every workflow task), shorten the history long-poll interval
	// to 1s (so a client waiting for a workflow's result is never stuck for the default 20s
	// when the server misses a wake-up), use one task-queue partition, refresh the
	// search-attribute cache on every read (so new search attributes are usable at once),
	// raise the visibility rate limit that the Web UI otherwise hits, and let a workflow have
	// 1,000 updates in flight rather than 10 (a burst of session creates reaches the session
	// manager at once; see config.go).
	DynamicConfig map[string]any
}

// Server is a running Temporal server and, optionally, its Web UI. Create one with [Start]
// and release it with [Server.Stop].
type Server struct {
	namespace string
	frontend  string
	uiURL     string

	temporal temporal.Server
	logger   *serverLogger
	unlock   func() // releases the database lock
	infoPath string // the address file, "" for none
	ui       *uiserver.Server
	uiDone   chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// Start starts a Temporal server as configured by cfg and returns once the frontend answers
// for cfg's namespace and, unless disabled, the Web UI accepts connections. ctx bounds the
// start only (when it has no deadline, Start gives up after a minute); cancelling it later
// does not stop the server, [Server.Stop] does.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}

	unlock := func() {}
	if r.dbPath != "" {
		if err := os.MkdirAll(filepath.Dir(r.dbPath), 0o700); err != nil {
			return nil, fmt.Errorf("devserver: create state directory: %w", err)
		}
		if unlock, err = lockDatabase(r.dbPath); err != nil {
			return nil, err
		}
	}
	sqlCfg, err := prepareDatabase(r)
	if err != nil {
		unlock()
		return nil, err
	}
	logger := newServerLogger(r.logger)
	ts, err := temporal.NewServer(serverOptions(r, sqlCfg, logger)...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("devserver: configure temporal server: %w", err)
	}
	if err := ts.Start(); err != nil {
		unlock()
		return nil, fmt.Errorf("devserver: start temporal server: %w", err)
	}
	s := &Server{
		namespace: r.namespace,
		frontend:  r.frontendAddr(),
		temporal:  ts,
		logger:    logger,
		unlock:    unlock,
	}
	if err := waitForFrontend(ctx, s.frontend, s.namespace); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if r.uiPort >= 0 {
		if err := s.startUI(ctx, r); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	if r.dbPath != "" {
		s.infoPath = filepath.Join(filepath.Dir(r.dbPath), InfoFile)
		if err := writeInfo(filepath.Dir(r.dbPath), Info{Address: s.frontend, Namespace: s.namespace, UI: s.uiURL, PID: os.Getpid()}); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddress returns the frontend's gRPC address as host:port, for
// go.temporal.io/sdk/client.Options.HostPort.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIAddress returns the Web UI's base URL, such as "http://127.0.0.1:8233", or "" when the
// server runs without a UI.
func (s *Server) UIAddress() string { return s.uiURL }

// Namespace returns the namespace that Start registered and waited for.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops the Web UI and the Temporal services and waits for them to finish. Workflows
// and their timers are not lost: they resume when a server is started again on the same
// Dir. Stop takes about a second, because the frontend drains its connections for at least
// that long. Calling Stop again does nothing and returns the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		defer s.unlock()
		if s.infoPath != "" {
			_ = os.Remove(s.infoPath)
		}
		s.logger.stopping.Store(true)
		var errs []error
		if s.ui != nil {
			s.ui.Stop()
			select {
			case <-s.uiDone:
			case <-time.After(5 * time.Second):
				errs = append(errs, errors.New("devserver: web UI did not stop within 5s"))
			}
		}
		if err := s.temporal.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("devserver: stop temporal server: %w", err))
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// resolved is a Config with its defaults filled in and its ports chosen.
type resolved struct {
	dbPath    string // "" when in memory
	namespace string
	ip        string
	logger    *slog.Logger // nil: discard
	dynamic   map[string]any

	frontendPort int
	httpPort     int // the frontend's HTTP API, which Nexus needs
	historyPort  int
	matchingPort int
	workerPort   int
	uiPort       int // negative: no UI
	codec        string
}

func (r *resolved) frontendAddr() string { return hostPort(r.ip, r.frontendPort) }

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

func resolve(cfg Config) (*resolved, error) {
	r := &resolved{
		namespace: cfg.Namespace,
		ip:        cfg.IP,
		logger:    cfg.Logger,
		dynamic:   cfg.DynamicConfig,
		codec:     cfg.CodecEndpoint,
	}
	if r.namespace == "" {
		r.namespace = "default"
	}
	if r.ip == "" {
		r.ip = "127.0.0.1"
	}
	if net.ParseIP(r.ip) == nil {
		return nil, fmt.Errorf("devserver: IP %q is not an IP address", r.ip)
	}
	if cfg.Port < 0 || cfg.Port > 65535 || cfg.UIPort > 65535 {
		return nil, fmt.Errorf("devserver: port out of range (Port %d, UIPort %d)", cfg.Port, cfg.UIPort)
	}
	if !cfg.InMemory {
		dir := cfg.Dir
		if dir == "" {
			var err error
			if dir, err = DefaultDir(); err != nil {
				return nil, err
			}
		}
		r.dbPath = filepath.Join(dir, DBFile)
	}

	// Given ports are checked first, so that a free port picked for another service cannot
	// be one of them.
	if cfg.Port != 0 {
		if err := checkFree(r.ip, cfg.Port, "frontend"); err != nil {
			return nil, err
		}
	}
	if cfg.UIPort > 0 {
		if err := checkFree(r.ip, cfg.UIPort, "web UI"); err != nil {
			return nil, err
		}
	}
	picked, err := freePorts(r.ip, 6)
	if err != nil {
		return nil, err
	}
	r.frontendPort, r.uiPort = cfg.Port, cfg.UIPort
	if r.frontendPort == 0 {
		r.frontendPort = picked[0]
	}
	if r.uiPort == 0 {
		r.uiPort = picked[1]
	}
	r.httpPort, r.historyPort, r.matchingPort, r.workerPort = picked[2], picked[3], picked[4], picked[5]
	return r, nil
}

// DefaultDir returns the directory a zero [Config] keeps its database in: $TROUPE_HOME when
// set, else ~/.troupe.
func DefaultDir() (string, error) {
	if d := os.Getenv("TROUPE_HOME"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("devserver: no Dir given, TROUPE_HOME unset, and no home directory: %w", err)
	}
	return filepath.Join(home, ".troupe"), nil
}

// waitForFrontend polls the frontend until DescribeNamespace succeeds. The server's Start
// returns when its services have started, but the frontend may still refuse calls for a
// moment while its namespace cache loads.
func waitForFrontend(ctx context.Context, addr, namespace string) error {
	var lastErr error
	for {
		lastErr = describeNamespace(ctx, addr, namespace)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: frontend at %s did not answer for namespace %q: %w (last error: %w)",
				addr, namespace, ctx.Err(), lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func describeNamespace(ctx context.Context, addr, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := sdkclient.DialContext(ctx, sdkclient.Options{
		HostPort:  addr,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	return err
}
