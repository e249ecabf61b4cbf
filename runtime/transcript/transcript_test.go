package transcript_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/transcript"
)

func TestTranscriptRoundTrip(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	big := agents.FunctionCallOutput("c1", strings.Repeat("y", transcript.InlineLimit+1))
	small := agents.FunctionCallOutput("c2", "tiny")
	offBig, err := transcript.Offload(ctx, store, "outputs/big", big)
	if err != nil {
		t.Fatal(err)
	}
	offSmall, _ := transcript.Offload(ctx, store, "outputs/small", small)
	if offBig.Output != "" || offBig.OutputRef != "outputs/big" || offSmall.OutputRef != "" {
		t.Fatalf("offload: big %+v small %+v", offBig.OutputRef, offSmall.OutputRef)
	}
	ts := transcript.NewTranscripts(store)
	ref := runtime.TranscriptRef{Key: "transcripts/t"}
	ref, err = ts.Append(ctx, ref, []agents.Item{agents.UserMessage("hi"), agents.FunctionCall("c1", "f", "{}")})
	if err != nil {
		t.Fatal(err)
	}
	ref, err = ts.Append(ctx, ref, []agents.Item{offBig, offSmall})
	if err != nil {
		t.Fatal(err)
	}
	// A second store on the same directory (another worker) reads it back.
	other, _ := blob.Open(ctx, strings.TrimSuffix(strings.TrimPrefix(store.URL(), "file://"), "?no_tmp_dir=true"))
	items, err := transcript.NewTranscripts(other).Load(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Segments != 2 || len(items) != 4 || items[2].Output != big.Output || items[2].OutputRef != "" || items[3].Output != "tiny" {
		t.Errorf("loaded %d segments, items %d", ref.Segments, len(items))
	}
	if _, err := transcript.NewTranscripts(other).Load(ctx, runtime.TranscriptRef{Key: "missing", Segments: 1}); !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing transcript: err = %v", err)
	}
}

// TestTranscriptCache checks that a cached transcript is never stale: a
// rewritten segment (an activity retried) is read anew, and callers may
// change what Load returns without changing what the next Load sees.
func TestTranscriptCache(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ts := transcript.NewTranscripts(store)
	ref, _ := ts.Append(ctx, runtime.TranscriptRef{Key: "k"}, []agents.Item{agents.UserMessage("first")})
	items, err := ts.Load(ctx, ref)
	if err != nil || items[0].Content != "first" {
		t.Fatalf("load = %v, %v", items, err)
	}
	items[0].Content = "changed by the caller"
	again, _ := ts.Load(ctx, ref)
	if again[0].Content != "first" {
		t.Errorf("a caller's change leaked into the cache: %q", again[0].Content)
	}
	// The attempt that wrote segment 0 is retried and writes other content.
	if _, err := ts.Append(ctx, runtime.TranscriptRef{Key: "k"}, []agents.Item{agents.UserMessage("retried")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.Load(ctx, ref); got[0].Content != "retried" {
		t.Errorf("after a rewrite Load gave %q, want the new content", got[0].Content)
	}
}

// A fork reads the segments it shares with its source where the source
// wrote them and its own under its key; what each appends later, the
// other does not see, however deep the forks go.
func TestTranscriptFork(t *testing.T) {
	for _, url := range []string{"mem://", t.TempDir()} {
		t.Run(url, func(t *testing.T) { testTranscriptFork(t, url) })
	}
}

func testTranscriptFork(t *testing.T, url string) {
	ctx := context.Background()
	store, err := blob.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	ts := transcript.NewTranscripts(store)
	say := func(ref runtime.TranscriptRef, text string) runtime.TranscriptRef {
		t.Helper()
		ref, err := ts.Append(ctx, ref, []agents.Item{agents.UserMessage(text)})
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	texts := func(ref runtime.TranscriptRef) string {
		t.Helper()
		items, err := ts.Load(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Content)
		}
		return strings.Join(out, ",")
	}
	src := say(say(runtime.TranscriptRef{Key: "transcripts/s/a"}, "one"), "two")
	fork := src.Fork("transcripts/f/a")
	src = say(src, "source three")
	fork = say(fork, "fork three")
	fork2 := fork.Fork("transcripts/g/a")
	fork = say(fork, "fork four")
	fork2 = say(fork2, "fork2 four")
	for _, tc := range []struct {
		ref  runtime.TranscriptRef
		want string
	}{
		{src, "one,two,source three"},
		{fork, "one,two,fork three,fork four"},
		{fork2, "one,two,fork three,fork2 four"},
	} {
		if got := texts(tc.ref); got != tc.want {
			t.Errorf("%s reads %s, want %s", tc.ref.Key, got, tc.want)
		}
	}
}

// BenchmarkTurns is the transcript's part of a 200-turn agent loop on a
// file store: each turn loads the whole transcript and the turn's pending
// output, and appends them with the model's answer as a segment.
func BenchmarkTurns(b *testing.B) {
	ctx := context.Background()
	store, err := blob.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ts := transcript.NewTranscripts(store)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		ref := runtime.TranscriptRef{Key: fmt.Sprintf("transcripts/run-%d/0-looper", n)}
		pending := []agents.Item{agents.UserMessage("go")}
		for turn := range 200 {
			if _, _, err := ts.LoadView(ctx, ref, pending); err != nil {
				b.Fatal(err)
			}
			call := agents.FunctionCall(fmt.Sprintf("call_%d", turn), "noop", `{"turn":"1"}`)
			call.ID, call.Agent = fmt.Sprintf("fc_%d", turn), "looper"
			if ref, err = ts.Append(ctx, ref, append(pending, call)); err != nil {
				b.Fatal(err)
			}
			out := agents.FunctionCallOutput(call.CallID, "ok")
			out.Agent = "looper"
			pending = []agents.Item{out}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(200*b.N), "µs/turn")
}
