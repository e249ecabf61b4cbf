package client

// This file holds what the client does with a message or a run's input
// over troupe.MessageInline: it stores it in the workers' blob store
// (Config.Inputs) and sends its reference, so that no Temporal payload or
// history holds it.

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe"
)

// InputStore is where a Client puts the messages and run inputs that go
// by reference: the blob store of the workers (a *blob.Store of their
// TROUPE_BLOB_URL fits). The workers read what it holds, so it must be
// theirs: a message put elsewhere fails its turn with troupe.ErrBlobMissing.
type InputStore interface {
	Put(ctx context.Context, key string, data []byte) error
}

// storeMessage checks message to run (what: "the message", "the run
// input") against troupe.MessageLimit and stores it in the client's
// InputStore, returning its reference. Call it only for a message over
// troupe.MessageInline.
func (c *Client) storeMessage(ctx context.Context, run, what, message string) (*troupe.MessageRef, error) {
	if err := troupe.CheckMessage(what, len(message)); err != nil {
		return nil, err
	}
	if c.cfg.Inputs == nil {
		return nil, troupe.NonRetryable(troupe.ErrPayloadTooLarge, "%s is %d bytes, over the %d that travel inside Temporal, and this client has no store for the larger ones: "+
			"set client.Config.Inputs to the workers' blob store (the troupe command uses TROUPE_BLOB_URL, or TROUPE_HOME's store)", what, len(message), troupe.MessageInline)
	}
	ref := troupe.NewMessageRef(run, message)
	if err := c.cfg.Inputs.Put(ctx, ref.Key, []byte(message)); err != nil {
		return nil, fmt.Errorf("client: store %s (%d bytes) in the workers' blob store: %w", what, len(message), err)
	}
	return &ref, nil
}

// takeInputRefs refuses a run input by reference (n bytes) when a worker
// polling the client's queue does not say it takes one
// (troupe.TakesInputRefs): it would run on the input's preview. It
// refuses one for a queue no worker polls too (troupe.ErrNoWorker): the
// worker that would come to take it might be one of those.
func (c *Client) takeInputRefs(ctx context.Context, n int) error {
	pollers, err := freshPollers(ctx, c.cfg.Temporal, c.cfg.TaskQueue)
	if err != nil {
		return fmt.Errorf("client: list the workers of task queue %s, to check they take a run input of %d bytes: %w", c.cfg.TaskQueue, n, err)
	}
	if len(pollers) == 0 {
		return troupe.NonRetryable(troupe.ErrNoWorker, "no worker serves task queue %s, and a run input over %d bytes (this one is %d) goes only to workers that say they take it by reference: start one first", c.cfg.TaskQueue, troupe.MessageInline, n)
	}
	var old []string
	for _, p := range pollers {
		if !troupe.TakesInputRefs(p.GetIdentity()) {
			_, who := troupe.LiveFeedOf(p.GetIdentity())
			old = append(old, who)
		}
	}
	if len(old) > 0 {
		return fmt.Errorf("%w (%s)", troupe.WorkerTooOld(c.cfg.TaskQueue, "", n), strings.Join(old, "; "))
	}
	return nil
}

// unknownUpdate reports whether err is a workflow's refusal of an update
// it has no handler for: a session on a worker from before that update.
func unknownUpdate(err error, name string) bool {
	return err != nil && strings.Contains(err.Error(), "unknown update "+name)
}
