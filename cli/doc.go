// Package cli is the troupe command line, reusable for your own graphs:
//
//	func main() { cli.Main(cli.Graph{Graph: mygraph.Graph(), Scenario: mygraph.Scenario}) }
//
// gives your binary the same commands as troupe: dev (embedded Temporal
// server, Web UI and a worker), worker (against a Temporal server), run
// (one run with live progress), runs ls|show|follow|cancel|terminate|resume
// (the runs of the server, --json for scripts), sessions new|ls|show|send|budget|fork|switch|pause|resume|stop|rename|policy
// (conversations, for scripts), chat (the terminal UI over sessions: open one,
// talk, watch each turn live; see package cli/chat), mcp serve (the exposed agents as MCP
// tools, over stdio or streamable HTTP; see package mcp/server), model
// serve (the scripted model server), and codec-server (the payload codec
// over HTTP, for the Temporal Web UI and the temporal CLI).
//
// Environment: OPENAI_API_KEY, OPENAI_BASE_URL and TROUPE_MODEL_API
// (responses|chat) choose the model; with no OPENAI_API_KEY the graphs'
// offline scenarios answer through the scripted model server.
//
// The commands that connect to Temporal (worker, run, runs, sessions, chat,
// mcp serve) read their connection as the temporal CLI and the SDK's
// contrib/envconfig do, through client.Connection: for each setting, the
// flag (--address, --namespace, --profile), else the TEMPORAL_* variables
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS and
// TEMPORAL_TLS_*, TEMPORAL_GRPC_META_*), else the profile of temporal.toml
// (--profile, else TEMPORAL_PROFILE, else "default", in TEMPORAL_CONFIG_FILE,
// else ~/.config/temporalio/temporal.toml). A profile that was named and is
// not there, or files that do not load, fail with troupe.ErrConnectionConfig,
// naming the file. Pointed at a server that way, run, runs, sessions and chat
// are only clients: run starts its run on the task queue (troupe, or
// --task-queue) for the workers there, and runs a worker of its own only
// with --worker. With no server named, the commands use the one
// embedded server of TROUPE_HOME (default ~/.troupe), whose state lives
// there: the first command that needs it starts it, the others find it
// through $TROUPE_HOME/server.json, and one that started it keeps it up
// until the others using it are done. Ctrl-C stops a command, never its
// run: the run goes on on any worker of its graph, and `runs resume`
// picks it up. A command interrupted so exits with status 130. TROUPE_BLOB_URL
// overrides the blob store (default file://$TROUPE_HOME/blobs).
//
// Every command that connects, dev included, seals the payloads it sends
// with the keys of TROUPE_CODEC_KEY_FILE and TROUPE_CODEC_KEYS (the active
// one named by TROUPE_CODEC_KEY_ID; see package codec), and opens those it
// reads with any of them; a payload sealed with a key it lacks fails with
// troupe.ErrPayloadKey, naming the key. dev with keys points its Web UI at
// a codec server of its own (--codec-port).
//
// run, runs follow and sessions send print each turn's text as the model
// generates it (not under --json): from the worker of their own process,
// or through the live feed of the worker that runs the turn, on this host
// or another: a query through Temporal of a workflow of the worker's
// process, which dev and worker advertise in their identity on the task
// queue (see package workflows/events). No worker opens a port for it;
// --deltas-addr and TROUPE_DELTAS_ADDR, which set where the delta relay
// of before it listened, are ignored, with a warning.
//
// Every command exports traces when the OTEL_EXPORTER_OTLP_* variables ask
// for them (package telemetry). dev and worker say in their identity on the
// task queue whether they do (" traces=on" or " traces=off"); a command
// that needs a worker of another process and exports while those of its
// queue do not says so once on stderr, naming them: their spans, most of a
// run's, are missing from its trace.
//
// Budgets (see package workflows): run --budget SPEC, sessions new --budget
// SPEC and chat --budget SPEC (for the sessions /new starts) replace the
// graph's default budget with SPEC, limits as agents.Budget.Change takes
// them ("cost=0.5,model_calls=40") or "off" for none; a bad SPEC is refused
// before anything starts. sessions budget SESSION [SPEC] shows a session's
// budget and, with SPEC, changes the limits it names (the chat's
// /budget [SPEC]). What runs and sessions spent shows where users look, in
// the words of package cli/spend: run prints on stderr, once its output is
// out, the usage and cost per agent and in all and where the budget stands
// (runs show and sessions show print the same); a run its budget stopped
// (troupe.BudgetExceeded) prints that report, how to give a run more, and
// one line of error, and exits with status 1; a session's turn the budget
// stopped, or a message it refused, says which limit is reached and how to
// raise it (sessions budget). Under --json, the run's result or failure
// carries the report.
package cli
