// Package retention keeps the blob store from growing without bound: it
// deletes the blob data of runs that are done with it, and keeps the data
// that a fork of a session shares with the session it was forked from.
//
// The contract:
//
//  1. Layout. Everything a run writes to the blob store lives under
//     transcripts/RUN/, outputs/RUN/, snapshots/RUN/ and events/RUN/
//     (RUN: the run's workflow id, the orchestrator's or the session's),
//     so a run's data can be found and deleted as one. Memory scopes and
//     the MCP tool specs live elsewhere and are never swept.
//  2. Sharing. A fork of a session shares its source's data (transcript
//     segments, snapshots) rather than copy it. Before the fork starts,
//     the session runs the Keep activity (KeepActivityName), which marks
//     each run whose data the fork shares (keep/RUN/FORK/mark).
//  3. Sweeping. Sweep deletes the data of each run that is done with it:
//     closed for the retention (Default when zero), or, for a run that the
//     namespace no longer holds (Temporal's own retention removed it),
//     with none of its data changed for the retention; and no run that
//     marked it still needs it. The data of a run still running, or whose
//     state cannot be read, is never touched. A run's marks go with its
//     data. StartSweeping sweeps in the background, at start and every
//     SweepInterval; the worker command (TROUPE_BLOB_RETENTION) runs it.
//  4. Removal. Remove deletes the data of a run at once, whatever its
//     age (a session removed: troupe sessions rm), but for the data a
//     fork still shares, which Sweep deletes later.
//
// A store shared by several namespaces or clusters would see the others'
// runs as unknown ones: give each namespace its own bucket or prefix.
package retention
