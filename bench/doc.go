// Package bench holds Troupe's benchmarks. Each one measures Troupe and a
// plain-Temporal baseline doing the same amount of orchestration in the same
// run, on the same embedded server (runtime/devserver, in memory) and with
// the same worker settings, and reports both and their ratio, so a number
// means something on any machine:
//
//   - BenchmarkTurnOverhead: a 201-turn single-agent run (200 turns that
//     each call a no-op function tool, then a text answer) against a
//     workflow running 200 sequential no-op activities; Troupe runs with its
//     default configuration and with Config.ModelActivities. It also reports
//     the model's own time (so Troupe's overhead per turn can be told from
//     it) and the process's memory after the run.
//   - BenchmarkGuardrailTurnOverhead: the same 201-turn run with a tool
//     guardrail whose check passes every call and an approval policy
//     whose predicate never makes a call wait, against the run without
//     them, on one worker in alternation; goal ratio ≤ 1.1 (each adds a
//     local activity per turn that calls the tool; the two run at once).
//   - BenchmarkFanOut: one turn calling 50 agents-as-tools against a
//     workflow starting 50 no-op child workflows in parallel.
//   - BenchmarkLongAgent: one agent's 5,001 turns (continuing as new every
//     500), the cost of turns 4,950 to 4,999 against turns 10 to 59, with
//     and without the scripted model server's own time: "compacted" with a
//     Compaction window (the model is shown 15 to 30 items), "whole" with
//     the whole transcript sent every turn.
//   - BenchmarkEventLatency: from the model's answer for a turn to the
//     arrival of the turn's event at a follower, p50 and p95: by polls only
//     (model calls local or as activities), through the worker's live feed
//     (a follower with no bus, as on another host; model calls local) and
//     in the worker's own process (FollowLive with the worker's EventBus),
//     against a bare Temporal update round trip on the same server.
//   - BenchmarkTimeToFirstDelta: from the start of a one-turn run (the
//     model thinks 200 ms, then streams about 2 KB) to the first text delta
//     at a follower, through the worker's live feed (a follower with no
//     bus, as on another host) and through the worker's EventBus, against
//     the scripted model's own time to first token, read by a plain HTTP
//     client in the same run; the time a delta takes through the feed once
//     the model has sent it; and the history events of a run followed with
//     live text against one on a worker that serves none.
//   - BenchmarkBudgetOverhead: the looper's 201 turns without a budget and
//     with one it stays under, on one worker (the looper holds the run's
//     ledger and asks no one: goal ratio ≤ 1.1), and the boss's fan-out
//     to 50 agents-as-tools likewise (each asks the run's root by update
//     before its call and reports after it).
//
// The rate-limit benchmark holds a run against a model's limit against
// the limit's own floor:
//
//   - BenchmarkRateLimitedModel: 50 loopers at once (10,050 model calls)
//     on two workers of one queue that share a limit of 50 calls at once
//     and 100 per second (Config.ModelLimits), against a scripted model
//     that keeps the same limit (429 past it): the wall time against
//     calls / rate, and what the model server saw (the most calls at
//     once, the most in a second, the calls turned away: none).
//
// The tracing benchmark holds a turn traced against one that is not:
//
//   - BenchmarkTracingOverhead: the looper's 201 turns on a worker whose
//     client has telemetry (spans and the SDK's metrics exported over
//     OTLP/HTTP to a local Jaeger, in its own process) against a worker
//     whose client has none, alternated in one run; goal ratio ≤ 1.1
//     (1.00 to 1.09 on a shared 2-core machine), and the spans exported
//     per turn (4: the model and tool calls' RunActivity spans and their
//     chat and execute_tool spans).
//
// The model is the scripted OpenAI-wire server (runtime/model/scripted),
// reached over real HTTP through openai-go's Responses API.
//
// The sandbox benchmarks hold Troupe's sandboxes against the bare tools
// they wrap, run in the same process and the same rounds:
//
//   - BenchmarkSandboxLifecycle: per backend (local, bwrap, docker with the
//     busybox test image, built when missing), Create with a small
//     manifest, a first Exec of `true` and Stop, against the bare
//     equivalent through os/exec (mkdir + `sh -c true` + rm; a bare `bwrap
//     ... true`; `docker run --rm --network none IMAGE true`), and the exec
//     round trip in a live session against `sh -c true`, a bare bwrap and
//     `docker exec`. A backend the machine lacks is skipped.
//   - BenchmarkSnapshot: Workspace.Snapshot and Restore of a 100 MB
//     workspace (20,000 small files and three large ones, compressible
//     and not) against `tar | zstd` and `zstd -d | tar -x`; it fails when
//     tar or zstd is missing.
//   - BenchmarkCodeReviewFanOut: a coordinator calling 8 sandboxed
//     reviewers (bwrap; each reads a file with exec_command, then answers
//     a typed finding) on the embedded server, against the same fan-out of
//     plain reviewers reading the file through a function tool; it also
//     counts the sandboxes alive after each run, which must be none.
//
// The MCP benchmark holds an MCP call against a direct start:
//
//   - BenchmarkMCPCall: a one-turn agent exposed as an MCP tool, called
//     through `troupe mcp serve`'s HTTP handler (mcp/server, streamable
//     HTTP, the go-sdk client) against starting the same run with the
//     Temporal client (workflows.Run) and waiting for its result; one call
//     at a time (medians), and 20 at once.
//
// The memory benchmark holds a turn with memory generation against one
// without:
//
//   - BenchmarkMemoryTurnLatency: two sessions of one worker take 100
//     turns in alternation, one of an agent with memory (each turn feeds
//     its scope, whose phases run in the background on the same model
//     server), one without; goal on-ratio ≈ 1.0 (0.93 on a shared 2-core
//     machine: consolidation is off the turn's path).
//   - BenchmarkMemoryPhase1Throughput: phase 1 of 100 rollouts in one
//     batch of the scope's workflow (4 at a time, 20 ms model calls, then
//     phase 2) against the same calls made by a plain loop, 4 at a time
//     (1.04 s against 0.58 s, ratio 1.8, on a shared 2-core machine: the
//     activities' blob reads and writes and the workflow's round trips).
//
// The learnt-skills benchmark holds the index of an agent's learnt skills
// (skills.WithLearnt) against the reads it made before it was cached:
//
//   - BenchmarkLearntIndex: a model call's index of 100 learnt skills (a
//     SKILL.md and three 2 KB files each, file:// store): the listing
//     alone, the work of the index before it was cached (every file of
//     every skill read one after another, each skill checked whole), an
//     empty cache (the 100 SKILL.md files read, 8 at once), and the cache
//     of the skills as they were (the listing, no read). On a shared
//     2-core machine: list 3.1 ms, before 16.4 ms, cold 9.3 ms, cached
//     3.5 ms (ratio 0.22 to 0.29 over three runs; cached 1.0 to 1.14
//     times the listing); on S3, where each of the 400 reads saved is a
//     request, the saving is that many round trips a call.
//
// Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/
//
// (make bench). Timings belong here only; pass/fail tests never assert on
// them.
package bench
