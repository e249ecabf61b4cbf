package transcript

// Begin: the record that a call of a tool that is not idempotent
// (agents.NotIdempotent) started, which tells an attempt that runs it
// again (a local activity re-run after a worker crash, a retry after a
// timeout, a sandbox call run again) that the call may have taken effect.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// ErrStarted reports a call that an earlier attempt started (Begin).
var ErrStarted = errors.New("transcript: the call was started before")

// Begin records that the tool call rc describes (its RunContext, CallID
// set) starts, unless an attempt before recorded it: then it returns an
// error wrapping ErrStarted, and the call must not run again. The record
// is a blob created in one atomic step (blob.Store.Create) under the
// run's outputs, outputs/<run>/calls/<idempotency key>, so of two
// attempts racing, on any workers, one runs the call; it goes with the
// run's other data (package workflows/retention). Any other error leaves
// the call not started, and an attempt may try again.
func Begin(ctx context.Context, store *blob.Store, rc agents.RunContext, tool string) error {
	key := rc.IdempotencyKey()
	if key == "" {
		return fmt.Errorf("transcript: begin %s: no call id", tool)
	}
	mark := beginKey(rc.WorkflowID, key)
	err := store.Create(ctx, mark, []byte(tool+" "+time.Now().UTC().Format(time.RFC3339Nano)+"\n"))
	if errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("%w: %s (%s)", ErrStarted, tool, key)
	}
	return err
}

// plainElem is a key element every store keeps as it is (blob.Store.Create
// in a file store takes no other).
var plainElem = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`)

// beginKey is the key of Begin's record for the call with idempotency key
// key of the agent workflow workflowID: under the run's outputs, the run
// being what comes before the first "/" of the id (troupe.RunOf). A run id
// that a file store would escape is replaced by its hash.
func beginKey(workflowID, key string) string {
	run, _, _ := strings.Cut(workflowID, "/")
	if !plainElem.MatchString(run) {
		sum := sha256.Sum256([]byte(run))
		run = "run-" + hex.EncodeToString(sum[:16])
	}
	return "outputs/" + run + "/calls/" + key
}
