package troupe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Big messages. A session's message or a run's input larger than
// MessageInline does not cross Temporal: the client stores its bytes in the
// workers' blob store under MessageKey and sends a MessageRef instead (a
// session's by SendRefUpdate, a run's in RunInput.InputRef). The workflows
// carry the reference and a preview; the message's item in the transcript
// carries the key (agents.Item.ContentRef), and only activities read the
// text: the model's, the guardrails', memory's. A message over MessageLimit
// is refused, typed ErrPayloadTooLarge, before anything is sent.
const (
	// MessageLimit is the largest message or run input Troupe takes:
	// 64 MiB. (A model has limits of its own: OpenAI takes at most
	// 10 MiB of text in one message, and fails a turn given more with a
	// troupe.ModelError.)
	MessageLimit = 64 << 20
	// MessageInline is the largest message or run input that travels
	// inside a Temporal payload, as it always did; larger ones go by
	// reference.
	MessageInline = PayloadLimit
	// SendRefUpdate sends a session a message by reference (SendInput
	// with Ref → SendResult). It is an update of its own so that a
	// session on a worker that does not know references rejects it
	// ("unknown update") instead of running a turn on the preview.
	SendRefUpdate = "troupe.send-ref"
	// ErrWorkerTooOld: the workers serving the queue (or the session's)
	// cannot take what was sent (a message by reference): upgrade them.
	ErrWorkerTooOld = "troupe.WorkerTooOld"
	// inputsPrefix is where big messages go in the blob store.
	inputsPrefix = "inputs/"
)

// MessageRef is a message (or a run's input) stored in the workers' blob
// store.
type MessageRef struct {
	// Key is the blob's key (MessageKey of its bytes).
	Key string `json:"key"`
	// Size is the message's length in bytes.
	Size int `json:"size"`
	// Preview is the message's start, for events, lists and records.
	Preview string `json:"preview"`
}

// MessageKey is the blob key of a big message to run (a run's or a
// session's workflow id): "inputs/RUN/" and the SHA-256 of its bytes. Under
// its run, it is swept with the run's other data after retention, removed
// with its session, and kept as long as a fork shares it; by its hash, the
// same message sent again (a retry) is one blob.
func MessageKey(run string, data []byte) string {
	sum := sha256.Sum256(data)
	return InputKey(run, hex.EncodeToString(sum[:]))
}

// InputKey is the blob key of an input of run (a run's or a session's
// workflow id) whose SHA-256 is sum, in hex: "inputs/RUN/SUM", as
// MessageKey names a big message, swept, removed and kept with the run's
// other data. A repository a client sends (package gitbundle) goes there
// too.
func InputKey(run, sum string) string {
	return inputsPrefix + run + "/" + sum
}

// NewMessageRef is the reference of message to run stored under
// MessageKey.
func NewMessageRef(run, message string) MessageRef {
	return MessageRef{Key: MessageKey(run, []byte(message)), Size: len(message), Preview: Preview(message, 200)}
}

// CheckMessage refuses a message (what: "the message", "the run input")
// of n bytes over MessageLimit, typed ErrPayloadTooLarge.
func CheckMessage(what string, n int) error {
	if n > MessageLimit {
		return NonRetryable(ErrPayloadTooLarge, "%s is %d bytes, over Troupe's limit of %d bytes (%d MiB) for one message: "+
			"put the material in a file the graph's tools read (a --var path, say) and send a message that points to it", what, n, MessageLimit, MessageLimit>>20)
	}
	return nil
}

// WorkerTooOld is the error of a message of n bytes that the workers of
// queue (or, when session is set, those running the session) cannot take
// by reference.
func WorkerTooOld(queue, session string, n int) error {
	who := "the worker(s) serving task queue " + queue
	if session != "" {
		who = "the worker(s) running session " + session
	}
	return NonRetryable(ErrWorkerTooOld, "%s are too old to take a message over %d bytes (this one is %d): upgrade them, or send less", who, MessageInline, n)
}

// inputRefsField marks, in a worker's identity, a worker that takes
// messages and run inputs by reference. It goes after the live feed's id
// (which LiveFeedOf cuts at a space; earlier troupes put the delta
// relay's URL there), where earlier readers of the identity do not look.
const inputRefsField = " inputs=ref"

// WithInputRefs is identity (or, when empty, the SDK's default,
// PID@HOST@) marked as a worker's that takes messages and run inputs by
// reference (TakesInputRefs).
func WithInputRefs(identity string) string {
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s@", os.Getpid(), host)
	}
	if TakesInputRefs(identity) {
		return identity
	}
	return identity + inputRefsField
}

// TakesInputRefs reports whether a worker identity says its worker takes
// messages and run inputs by reference.
func TakesInputRefs(identity string) bool {
	return strings.HasSuffix(identity, inputRefsField) || strings.Contains(identity, inputRefsField+" ")
}

// withoutInputRefs is identity without the mark of WithInputRefs.
func withoutInputRefs(identity string) string {
	return strings.Replace(identity, inputRefsField, "", 1)
}
