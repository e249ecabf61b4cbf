package agents

// This file gives each tool call its idempotency key: what a tool passes
// on to the services it changes (a payment API's Idempotency-Key header, a
// ticket's external id), so that a call run again after a worker crash
// has its effect once.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// IdempotencyKeyPrefix begins every idempotency key.
const IdempotencyKeyPrefix = "troupe-"

// IdempotencyKey is the idempotency key of the tool call rc describes: a
// string of IdempotencyKeyPrefix and 32 hex digits, the same for every
// attempt of the call (activity retries, a worker killed mid-call,
// replays, the agent's workflow continued as new) and different for any
// other call: another call id, turn, agent or agent workflow (an
// agent-as-tool's, a later handoff's, each session turn's, a forked
// session's), or another execution of a reused workflow id. It is "" when
// rc is not a tool call's (CallID empty).
func (rc RunContext) IdempotencyKey() string {
	if rc.CallID == "" {
		return ""
	}
	h := sha256.New()
	// Each field length-prefixed, so no two different calls hash the same
	// bytes however their fields' text runs together.
	for _, f := range []string{"troupe.call.v1", rc.RunID, rc.WorkflowID, rc.Execution, rc.Agent, strconv.Itoa(rc.Turn), rc.CallID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return IdempotencyKeyPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// ForCall returns rc for the tool call callID: rc with CallID set.
func (rc RunContext) ForCall(callID string) RunContext {
	rc.CallID = callID
	return rc
}

// IdempotencyKey returns the idempotency key of the tool call ctx runs:
// the key RunContext.IdempotencyKey gives for the call's RunContext, or
// "" outside a tool call. Function tools (sandbox tools too) get it this
// way; MCP calls send it in their request's _meta, and sandbox commands
// find it in their environment as TROUPE_IDEMPOTENCY_KEY.
func IdempotencyKey(ctx context.Context) string {
	rc, ok := RunContextFrom(ctx)
	if !ok {
		return ""
	}
	return rc.IdempotencyKey()
}

// InDoubtPrefix begins the output the model reads for a call of a tool
// that is not idempotent (NotIdempotent) which an earlier attempt started
// and did not finish (its worker was lost, or the call timed out): the
// call is not made again, and the model is told to check what happened.
const InDoubtPrefix = "Error: the call may or may not have taken effect"

// InDoubtOutput is the output of an in-doubt call of tool whose key is
// key (see InDoubtPrefix).
func InDoubtOutput(tool, key string) string {
	return InDoubtPrefix + ": an earlier attempt of this call of " + tool +
		" started and did not finish (the worker running it was lost mid-call, or it timed out), and " + tool +
		" is not idempotent, so it was not run again. Check whether it took effect before calling it again (its idempotency key was " + key + ")."
}
