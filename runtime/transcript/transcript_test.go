package transcript_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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

// A user's message stored apart (agents.Item.ContentRef) stays a
// reference in its segment, and every read, of the transcript or of a
// turn's pending items, gives its text; a message whose blob is gone is an
// error, not an empty message.
func TestTranscriptMessageRef(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("a long message. ", 1000)
	if err := store.Put(ctx, "inputs/run-1/abc", []byte(text)); err != nil {
		t.Fatal(err)
	}
	msg := agents.UserMessageRef("inputs/run-1/abc")
	ts := transcript.NewTranscripts(store)
	ref, err := ts.Append(ctx, runtime.TranscriptRef{Key: "transcripts/run-1"}, []agents.Item{msg, agents.AssistantMessage("ok")})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := store.Get(ctx, "transcripts/run-1/000000.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(seg), "a long message") || !strings.Contains(string(seg), "inputs/run-1/abc") {
		t.Errorf("the segment is %s; want the message's reference, not its text", cut300(string(seg)))
	}
	items, _, err := transcript.NewTranscripts(store).LoadView(ctx, ref, []agents.Item{msg})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || items[0].Content != text || items[0].ContentRef != "" || items[2].Content != text {
		t.Errorf("read back %d items; want the message's text, resolved, in the transcript and the pending items", len(items))
	}
	if _, err := transcript.ResolveOutputs(ctx, store, []agents.Item{agents.UserMessageRef("inputs/run-1/gone")}); err == nil {
		t.Error("a message whose blob is gone resolved without an error")
	}
}

func cut300(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
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

// TestTranscriptWritten: a segment is read back as the store holds it,
// whether this worker wrote it last (and the store still holds that) or
// not: what JSON makes of the items (invalid UTF-8, empty lists), another
// worker's rewrite, and a rewrite after the segment was read.
func TestTranscriptWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := transcript.NewTranscripts(store)
	odd := []agents.Item{
		agents.UserMessage("bad \xff utf8"),
		{Type: agents.ItemFunctionCallOutput, CallID: "c1", Output: "x", Images: []string{}},
		agents.FunctionCallOutput("c2", strings.Repeat("y", 10)),
	}
	ref, err := ts.Append(ctx, runtime.TranscriptRef{Key: "transcripts/w"}, odd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.Load(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want, err := transcript.NewTranscripts(other).Load(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got[0].Content != "bad \uFFFD utf8" || got[1].Images != nil {
		t.Errorf("read back as written:\n got %#v\nwant %#v", got, want)
	}

	// Another worker's attempt writes segment 1 again after this one's.
	ref1, err := ts.Append(ctx, ref, []agents.Item{agents.UserMessage("this worker's")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transcript.NewTranscripts(other).Append(ctx, ref, []agents.Item{agents.UserMessage("the other's")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.Load(ctx, ref1); got[len(got)-1].Content != "the other's" {
		t.Errorf("after another worker's rewrite, read %q", got[len(got)-1].Content)
	}

	// Segments of many transcripts written, then read: each as written.
	var refs []runtime.TranscriptRef
	for i := range 300 {
		r, err := ts.Append(ctx, runtime.TranscriptRef{Key: fmt.Sprintf("transcripts/many-%d", i)}, []agents.Item{agents.UserMessage(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	for i, r := range refs {
		if got, err := ts.Load(ctx, r); err != nil || got[0].Content != fmt.Sprint(i) {
			t.Fatalf("transcript %d: %v, %v", i, got, err)
		}
	}
}

// The segment a turn wrote is not read back while the store holds what
// was written: a change that a store never makes (in place, with the
// file's size and time kept) goes unseen, which shows that it was not
// read; a rewrite, as stores make them, is read.
func TestTranscriptWrittenIsNotReadBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := store.PutWritten(ctx, "probe", []byte("x")); err != nil || w == nil {
		t.Skip("the test directory is not on a file system PutWritten holds files on")
	} else {
		w.Close()
	}
	ts := transcript.NewTranscripts(store)
	ref, err := ts.Append(ctx, runtime.TranscriptRef{Key: "transcripts/r"}, []agents.Item{agents.UserMessage("aaaa")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "transcripts", "r", "000000.json")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strings.Replace(string(data), "aaaa", "bbbb", 1)), 0)
	f.Close()
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.Load(ctx, ref); got[0].Content != "aaaa" {
		t.Errorf("read %q: the segment written was read back", got[0].Content)
	}

	// Written again by this worker, then by a store's plain Put.
	ref2, err := ts.Append(ctx, runtime.TranscriptRef{Key: "transcripts/r2"}, []agents.Item{agents.UserMessage("mine")})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "transcripts/r2/000000.json", []byte(`[{"type":"message","role":"user","content":"put"}]`)); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.Load(ctx, ref2); got[0].Content != "put" {
		t.Errorf("after a Put, read %q", got[0].Content)
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

// Close lets go of the segments held as written: they are read back.
func TestTranscriptClose(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ts := transcript.NewTranscripts(store)
	ref, err := ts.Append(ctx, runtime.TranscriptRef{Key: "transcripts/c"}, []agents.Item{agents.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.Load(ctx, ref); err != nil || got[0].Content != "hi" {
		t.Errorf("after Close: %v, %v", got, err)
	}
}
