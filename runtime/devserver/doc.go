// Package devserver runs a real Temporal server, and optionally its Web UI, inside the calling
// process. It is what `troupe dev` starts and what end-to-end tests run against.
//
// The server is the public go.temporal.io/server/temporal library configured the way the
// Temporal CLI's `server start-dev` configures it: SQLite persistence (one file, or memory),
// one history shard, a single cluster, static membership and all four services (frontend,
// history, matching, worker) on loopback ports. On top of that it applies dynamic-config
// defaults tuned for one developer machine; see [Config.DynamicConfig].
//
// [Start] does the following, in order:
//
//  1. Resolves the Config: directory, namespace, IP and ports (free loopback ports are picked
//     for any port left at zero; a port that is given but taken is reported as [ErrPortInUse]).
//  2. Locks the database file against other servers ([ErrDatabaseInUse]) and creates the
//     SQLite schema if the file does not exist yet. An existing file is reused as it is, so
//     workflows, their histories and timers survive a restart.
//  3. Registers the namespace in the database if it is missing (idempotent).
//  4. Starts the Temporal services and waits until the frontend answers DescribeNamespace for
//     the namespace, so a client dialled after Start returns can be used at once.
//  5. Starts the Web UI, unless [Config.UIPort] is negative, and waits until it accepts
//     connections.
//  6. For a file-backed server, records its addresses in [InfoFile] in the Dir, so other
//     processes on the same Dir find it with [Running] instead of failing on the lock.
//
// [Server.Stop] removes the address file and stops the UI and the services; it is safe to
// call more than once.
//
// # Process-wide state
//
// Several servers can run in one process if each has its own Dir (or is InMemory) and its
// own ports. Two things outlive [Server.Stop], because the Temporal SQLite plugin keeps one
// process-wide connection per database and never closes it: the database file stays open
// until the process exits (a later Start on the same Dir reuses that connection), and an
// in-memory database keeps its memory until the process exits. Two servers cannot share a
// Dir at the same time, in one process or in two: the second Start fails with
// [ErrDatabaseInUse] (enforced with flock on Unix; not checked on other systems).
//
// The database file is the one `temporal server start-dev --db-filename` uses (cluster
// "active"), so the Temporal CLI can open it too when troupe is not running.
package devserver
