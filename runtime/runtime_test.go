package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
)

type verdict struct {
	OK bool `json:"ok"`
}

func TestDecide(t *testing.T) {
	plain := &agents.Agent{Name: "p"}
	typed := &agents.Agent{Name: "t", Output: agents.MustOutput[verdict]()}
	call := agents.FunctionCall("c1", "x", "{}")
	tests := []struct {
		name      string
		agent     *agents.Agent
		output    []agents.Item
		final     string
		calls     int
		outputErr string
	}{
		{"text final", plain, []agents.Item{agents.AssistantMessage("hi")}, `"hi"`, 0, ""},
		{"empty output is an empty final", plain, nil, `""`, 0, ""},
		{"calls win over text", plain, []agents.Item{agents.AssistantMessage("thinking"), call, call}, "", 2, ""},
		{"valid structured", typed, []agents.Item{agents.AssistantMessage(`{"ok": true}`)}, `{"ok":true}`, 0, ""},
		{"invalid structured", typed, []agents.Item{agents.AssistantMessage(`{"ok":"yes"}`)}, "", 0, "/ok"},
		{"structured without message", typed, nil, "", 0, "no final output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.Decide(tc.agent, tc.output)
			if string(s.Final) != tc.final || len(s.Calls) != tc.calls {
				t.Errorf("step = %+v", s)
			}
			if (tc.outputErr == "") != (s.OutputError == "") || !strings.Contains(s.OutputError, tc.outputErr) {
				t.Errorf("output error = %q, want %q", s.OutputError, tc.outputErr)
			}
		})
	}
}

func TestSort(t *testing.T) {
	tool := agents.MustFunctionTool("f", "", func(context.Context, verdict) (string, error) { return "", nil })
	g := agents.MustGraph("g", "a",
		&agents.Agent{Name: "a", Tools: []agents.Tool{tool, agents.AsTool("b", "ask_b", "")},
			Handoffs: []agents.Handoff{agents.HandoffTo("b"), agents.HandoffTo("c")}},
		&agents.Agent{Name: "b"}, &agents.Agent{Name: "c"})
	d := runtime.Sort(runtime.SpecOf(g, runtime.RunSettings{MaxHandoffs: 5, MaxToolDepth: 3}).Agent("a"), []agents.Item{
		agents.FunctionCall("1", "f", "{}"),
		agents.FunctionCall("2", "ask_b", `{"input":"x"}`),
		agents.FunctionCall("3", "transfer_to_c", "{}"),
		agents.FunctionCall("4", "transfer_to_b", "{}"),
		agents.FunctionCall("5", "ghost", "{}"),
		agents.FunctionCall("6", "everything_echo", `{"message":"hi"}`),
		agents.FunctionCall("7", "f", "{}"),
	}, []string{"everything_echo", "f"})
	if len(d.Functions) != 2 || len(d.AgentTools) != 1 || d.Handoff == nil || d.Handoff.CallID != "3" {
		t.Fatalf("dispatch = %+v", d)
	}
	// An MCP tool never shadows the agent's own tool of the same name.
	if len(d.MCP) != 1 || d.MCP[0].CallID != "6" {
		t.Fatalf("MCP calls = %+v", d.MCP)
	}
	if len(d.Outputs) != 2 || !strings.Contains(d.Outputs[0].Output, "only the first (transfer_to_c)") ||
		!strings.Contains(d.Outputs[1].Output, `tool "ghost" does not exist`) || !strings.Contains(d.Outputs[1].Output, "transfer_to_b") ||
		!strings.Contains(d.Outputs[1].Output, "everything_echo") {
		t.Errorf("outputs = %+v", d.Outputs)
	}
}

func TestTranscriptRoundTrip(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	big := agents.FunctionCallOutput("c1", strings.Repeat("y", runtime.InlineLimit+1))
	small := agents.FunctionCallOutput("c2", "tiny")
	offBig, err := runtime.Offload(ctx, store, "outputs/big", big)
	if err != nil {
		t.Fatal(err)
	}
	offSmall, _ := runtime.Offload(ctx, store, "outputs/small", small)
	if offBig.Output != "" || offBig.OutputRef != "outputs/big" || offSmall.OutputRef != "" {
		t.Fatalf("offload: big %+v small %+v", offBig.OutputRef, offSmall.OutputRef)
	}
	ts := runtime.NewTranscripts(store)
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
	items, err := runtime.NewTranscripts(other).Load(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Segments != 2 || len(items) != 4 || items[2].Output != big.Output || items[2].OutputRef != "" || items[3].Output != "tiny" {
		t.Errorf("loaded %d segments, items %d", ref.Segments, len(items))
	}
	if _, err := runtime.NewTranscripts(other).Load(ctx, runtime.TranscriptRef{Key: "missing", Segments: 1}); !strings.Contains(err.Error(), "not found") {
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
	ts := runtime.NewTranscripts(store)
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
