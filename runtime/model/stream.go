// This file holds what both adapters share to stream a turn: the text
// deltas a caller can receive as they arrive (WithDeltas), and the errors
// of a stream that broke.

package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// Delta is a piece of a turn's text as the model generates it.
type Delta struct {
	// Item is the index, in the turn's Response.Output, of the message
	// the text belongs to.
	Item int
	// Text is the piece: appended in order, the deltas of an item are the
	// item's Content.
	Text string
}

type deltasKey struct{}

// WithDeltas returns ctx carrying fn: a Respond called with that context
// calls fn with each piece of the answer's text as it arrives (a message's
// output text; not function call arguments, reasoning or refusals), in
// order, on Respond's goroutine, before Respond returns. fn must be quick:
// the next piece is read once it returns.
//
// The deltas are a preview. A call that fails after some deltas has sent
// them, and a retry sends its own from the start; only the Response is the
// turn. A server that answers a streamed request with a whole response
// gives each message's text as one delta.
func WithDeltas(ctx context.Context, fn func(Delta)) context.Context {
	return context.WithValue(ctx, deltasKey{}, fn)
}

// deltasOf returns the func WithDeltas put in ctx, or one that does
// nothing.
func deltasOf(ctx context.Context) func(Delta) {
	if fn, ok := ctx.Value(deltasKey{}).(func(Delta)); ok && fn != nil {
		return fn
	}
	return func(Delta) {}
}

// wholeJSON reports whether a streamed request was answered with a whole
// JSON document rather than server-sent events, as servers that do not
// stream (and some proxies) do.
func wholeJSON(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json"
}

// decodeWhole decodes the whole JSON answer of a streamed request into v.
func decodeWhole(resp *http.Response, v any) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// streamError turns the error that ended a stream after its headers into
// the error Respond returns: the caller's context's error when it ended,
// else a retryable *APIError (StatusCode 0), since the answer was cut
// short on the way and a new call may get it whole.
func streamError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("model: %w", ctxErr)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("model: %w", err)
	}
	ae := &APIError{Type: "stream_error", Message: "the answer's stream broke: " + err.Error(), Err: err}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		// An error event: {"error": {"type", "code", "message"}}.
		var body struct {
			Error struct {
				Type    string `json:"type"`
				Code    any    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(se.Event.Data, &body) == nil && body.Error.Message != "" {
			ae.Message = "the server sent an error mid-stream: " + truncate(body.Error.Message)
			if body.Error.Code != nil {
				ae.Code = fmt.Sprint(body.Error.Code)
			}
		}
	}
	return ae
}

// errCutShort is the error of a stream that ended without its last event.
var errCutShort = errors.New("the stream ended before the answer was complete")
