// Package transcript reads and writes the transcripts that package
// runtime's references name, in the blob store, and the tool outputs that
// travel by reference. Workflows carry only a runtime.TranscriptRef; their
// activities use this package:
//
//  1. A Transcripts (NewTranscripts, one per worker) appends a turn's
//     items as the next segment of a transcript (Append; writing a
//     segment again, as a retried activity does, replaces it).
//  2. Load reads a whole transcript back; LoadView reads what the model
//     sees of it (the window of a runtime.TranscriptView when it has one)
//     followed by the turn's pending items, with each item's position, so
//     that runtime.Window can name the next window. Segments read are kept
//     decoded, so a turn decodes only the segments it has not seen; the
//     segment a turn appended is not read back from a file store while
//     the store still holds the very file written (blob.Written).
//  3. A tool output larger than InlineLimit is stored apart (Offload) and
//     travels as the item's OutputRef; ResolveOutputs, and every read
//     above, put the output back.
//
// Only reads fill the cache of a Transcripts (a segment taken as written is
// taken when read, and only if a read would return it), so what it holds
// was written by an attempt that the workflow accepted. Segments of a fork
// (runtime.TranscriptRef.Fork) are read where their source wrote them.
package transcript
