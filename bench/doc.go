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
//   - BenchmarkFanOut: one turn calling 50 agents-as-tools against a
//     workflow starting 50 no-op child workflows in parallel.
//
// The model is the scripted OpenAI-wire server (runtime/model/scripted),
// reached over real HTTP through openai-go's Responses API.
//
// Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/
//
// (make bench). Timings belong here only; pass/fail tests never assert on
// them.
package bench
