package devserver

// The server's static configuration: persistence, cluster metadata, services and membership,
// and the dynamic-config defaults. Everything is built in memory; no YAML file is read.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	// clusterName is the cluster's name, the same as the Temporal CLI's dev server uses, so
	// either can open the other's database file.
	clusterName = "active"
	storeName   = "sqlite-default"
)

// defaultDynamicConfig returns this package's dynamic-config defaults; Config.DynamicConfig is
// applied over them.
func defaultDynamicConfig() map[dynamicconfig.Key]any {
	d := []struct {
		setting dynamicconfig.GenericSetting
		value   any
	}{
		// The history queues poll the database at most 20 times a second by default, which
		// adds tens of milliseconds to each workflow task on an otherwise idle server.
		// Measured here: ~98 ms per one-activity workflow with the defaults, 54-69 ms at 1000/s.
		{dynamicconfig.TransferProcessorMaxPollRPS, 1000},
		{dynamicconfig.TimerProcessorMaxPollRPS, 1000},
		{dynamicconfig.VisibilityProcessorMaxPollRPS, 1000},
		{dynamicconfig.OutboundProcessorMaxPollRPS, 1000},
		// A client waiting for a workflow's result long-polls the history service, which
		// can miss the wake-up for the close event when events follow each other within
		// milliseconds (a one-slot notification channel that drops on full, in server
		// v1.32.1). The poll then ends only at this interval: 20 s by default, measured here
		// on ~3% of one-activity workflows. A short interval bounds that stall; the cost is
		// one more poll per waiting client per interval.
		{dynamicconfig.HistoryLongPollExpirationInterval, time.Second},
		// One worker process polls a dev server; more partitions only spread its tasks thin.
		{dynamicconfig.MatchingNumTaskqueueReadPartitions, 1},
		{dynamicconfig.MatchingNumTaskqueueWritePartitions, 1},
		// Search attributes added at run time are usable at once.
		{dynamicconfig.ForceSearchAttributesCacheRefreshOnRead, true},
		// Both are on by default in this server version; stated so an upgrade cannot
		// silently turn off APIs that workflows here rely on.
		{dynamicconfig.FrontendEnableUpdateWorkflowExecution, true},
		{dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted, true},
		// The Web UI lists and counts workflows often; the default of 10/s throttles it.
		{dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance, 100},
		// A smaller mutable-state cache than a production host's, as the Temporal CLI does.
		{dynamicconfig.HistoryCacheHostLevelMaxSize, 8096},
		// A workflow takes every update its callers send at once: the session manager, the
		// one door for creating sessions, has one in flight per caller, 64 in a burst of
		// creates. Past the default limit of 10 the server refuses an update and, in server
		// v1.32.1, clears the workflow's cached state as it does (the refusal is an error
		// under the workflow's lock), which drops the updates admitted and the workflow task
		// scheduled for them. Callers that send again then refuse each other faster than a
		// workflow task can run, and the manager takes no update at all (measured: cleared
		// every ~80 ms, for good, under CPU load). The payload bound
		// (history.maxInFlightUpdatePayloads, 20 MB) still holds.
		{dynamicconfig.WorkflowExecutionMaxInFlightUpdates, 1000},
	}
	out := make(map[dynamicconfig.Key]any, len(d))
	for _, kv := range d {
		out[kv.setting.Key()] = kv.value
	}
	return out
}

func dynamicConfigClient(overrides map[string]any) dynamicconfig.Client {
	c := dynamicconfig.StaticClient(defaultDynamicConfig())
	for k, v := range overrides {
		c[dynamicconfig.MakeKey(k)] = v
	}
	return c
}

// sqlConfig returns the persistence config for r's database. SQLite connect attributes that
// are not URI parameters (mode, cache, ...) become PRAGMAs on every connection.
func sqlConfig(r *resolved) *config.SQL {
	if r.dbPath == "" {
		// Temporal's SQLite plugin creates the schema itself for in-memory databases. The
		// name only has to be unique in the process: shared-cache memory databases are
		// process-wide.
		var b [8]byte
		_, _ = rand.Read(b[:])
		return &config.SQL{
			PluginName:        sqliteplugin.PluginName,
			DatabaseName:      "troupe-" + hex.EncodeToString(b[:]),
			ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
		}
	}
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: r.dbPath,
		ConnectAttributes: map[string]string{
			"mode": "rwc",
			// WAL with synchronous=normal commits without an fsync per transaction; a
			// power cut can lose the last transactions but not corrupt the file. Measured
			// here: 27-33 ms per one-activity workflow, against 54-69 ms with the defaults.
			"journal_mode": "wal",
			"synchronous":  "normal",
			// Wait for, rather than fail on, a lock held by another reader of the file,
			// such as the sqlite3 shell.
			"busy_timeout": "5000",
		},
	}
}

// prepareDatabase creates the schema when the database file is new and registers the
// namespace when it is missing, both before the server starts, as the server itself does
// neither for a file-backed SQLite store.
func prepareDatabase(r *resolved) (*config.SQL, error) {
	sqlCfg := sqlConfig(r)
	if r.dbPath != "" {
		_, err := os.Stat(r.dbPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
				// Leave no half-made file behind: the next Start would take it for a
				// complete one.
				removeDB(r.dbPath)
				return nil, fmt.Errorf("devserver: create schema in %s: %w", r.dbPath, err)
			}
		case err != nil:
			return nil, fmt.Errorf("devserver: database file: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, r.namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace %q: %w", r.namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("devserver: register namespace %q: %w", r.namespace, err)
	}
	return sqlCfg, nil
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(path + suffix)
	}
}

func serverConfig(r *resolved, sqlCfg *config.SQL) *config.Config {
	frontend := r.frontendAddr()
	service := func(port int) config.Service {
		var s config.Service
		s.RPC.GRPCPort = port
		s.RPC.BindOnIP = r.ip
		return s
	}

	var c config.Config
	c.Global.Membership.MaxJoinDuration = 30 * time.Second
	c.Global.Membership.BroadcastAddress = r.ip
	c.Persistence.DefaultStore = storeName
	c.Persistence.VisibilityStore = storeName
	c.Persistence.NumHistoryShards = 1
	c.Persistence.DataStores = map[string]config.DataStore{storeName: {SQL: sqlCfg}}
	// On a reused file the stored cluster metadata wins over this block, except for the RPC
	// address, which follows the frontend's current port.
	c.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				HTTPAddress:            hostPort(r.ip, r.httpPort),
				ClusterID:              uuid.NewString(),
			},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	frontendService := service(r.frontendPort)
	frontendService.RPC.HTTPPort = r.httpPort
	c.Services = map[string]config.Service{
		string(primitives.FrontendService): frontendService,
		string(primitives.HistoryService):  service(r.historyPort),
		string(primitives.MatchingService): service(r.matchingPort),
		string(primitives.WorkerService):   service(r.workerPort),
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = frontend
	return &c
}

func serverOptions(r *resolved, sqlCfg *config.SQL, logger *serverLogger) []temporal.ServerOption {
	hosts := func(port int) static.Hosts { return static.SingleLocalHost(hostPort(r.ip, port)) }
	return []temporal.ServerOption{
		temporal.WithConfig(serverConfig(r, sqlCfg)),
		temporal.ForServices(temporal.DefaultServices),
		// Static membership: no gossip ring to join, so start does not wait for one.
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: hosts(r.frontendPort),
			primitives.HistoryService:  hosts(r.historyPort),
			primitives.MatchingService: hosts(r.matchingPort),
			primitives.WorkerService:   hosts(r.workerPort),
		}),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicConfigClient(r.dynamic)),
	}
}
