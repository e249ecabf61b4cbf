package transcript_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

// TestBegin: the first attempt of a call begins it, every later one finds
// it started, of attempts racing exactly one begins, and other calls are
// not affected; on a file store (whose conditional writes take plain keys
// only) and in memory, and for a run id a file store would escape.
func TestBegin(t *testing.T) {
	for _, kind := range []string{"file", "mem"} {
		for _, run := range []string{"run-1", "my run: №1"} {
			t.Run(kind+"/"+run, func(t *testing.T) {
				ctx := context.Background()
				url := "mem://"
				if kind == "file" {
					url = t.TempDir()
				}
				store, err := blob.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				rc := agents.RunContext{RunID: run, WorkflowID: run + "/0-billing", Agent: "billing", Turn: 1, CallID: "call_1"}
				var begun atomic.Int32
				var wg sync.WaitGroup
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						switch err := transcript.Begin(ctx, store, rc, "charge"); {
						case err == nil:
							begun.Add(1)
						case !errors.Is(err, transcript.ErrStarted):
							t.Errorf("Begin: %v", err)
						}
					}()
				}
				wg.Wait()
				if n := begun.Load(); n != 1 {
					t.Fatalf("%d of 8 racing attempts began the call, want 1", n)
				}
				if err := transcript.Begin(ctx, store, rc, "charge"); !errors.Is(err, transcript.ErrStarted) {
					t.Errorf("a later attempt: %v, want ErrStarted", err)
				}
				for _, other := range []agents.RunContext{rc.ForCall("call_2"), func() agents.RunContext { o := rc; o.Turn = 2; return o }()} {
					if err := transcript.Begin(ctx, store, other, "charge"); err != nil {
						t.Errorf("another call (%s, turn %d): %v", other.CallID, other.Turn, err)
					}
				}
				if err := transcript.Begin(ctx, store, rc.ForCall(""), "charge"); err == nil || errors.Is(err, transcript.ErrStarted) {
					t.Errorf("a RunContext of no call: %v, want an error", err)
				}
			})
		}
	}
}
