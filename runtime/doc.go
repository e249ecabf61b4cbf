// Package runtime holds the agent loop as plain deterministic Go: what a
// model turn's output means (final output, tool calls, a handoff), how tool
// results and corrections are fed back, and where the transcript lives.
//
// It imports no Temporal package and no blob store, so the loop is tested
// without a server; the workflows package drives it turn by turn from
// workflow code and activities.
//
// Transcripts live in the blob store as numbered segments under one key
// prefix. Workflows carry only a TranscriptRef (the prefix and the segment
// count), so Temporal history grows with the number of turns, not with
// their square. An agent whose compactor keeps a window
// (agents.WindowCompactor) also carries a TranscriptView, what the model
// still sees after the last trim, so each turn loads that window and not
// the whole transcript: a turn's cost stays flat over thousands of turns.
// These references are plain data here; reading and writing what they
// name is package transcript's (runtime/transcript), in activities.
package runtime
