// Package binarychecksum, imported for its side effect by the tests of
// workflow code, gives the Temporal SDK its binary checksum before any
// workflow runs.
//
// The SDK's test environment (go.temporal.io/sdk/testsuite) passes its
// activity handlers no build id, so the first activity a test process
// schedules makes the SDK hash the whole executable (an MD5 of a test
// binary of a hundred megabytes or more, under -race) inside the
// workflow's goroutine. On a busy machine that takes over a second, and
// the SDK's deadlock detector fails the workflow with TMPRL1101
// ("Potential deadlock detected") though the workflow's own code did
// nothing heavy. A checksum set up front is never computed.
//
// Production workers are not affected: worker.New computes the checksum
// (or takes the build id) when the worker is made, outside workflow code.
package binarychecksum

import "go.temporal.io/sdk/worker"

// Checksum is the binary checksum of a test process that imports this
// package.
const Checksum = "troupe-test-binary"

func init() { worker.SetBinaryChecksum(Checksum) }
