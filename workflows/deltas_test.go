package workflows

// These tests hold the model activity's deltas without a Temporal
// server, with the scripted model server over HTTP. The live feed's
// answers are workflows/events' tests; the end-to-end path (discovery
// through the task queue's pollers, followers in another process, no
// port on the worker) is e2e/stream_test.go's.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows/events"
)

// TestModelActivityPublishesDeltas: the model activity hands the turn's
// text to the bus as it streams in, as deltas of the agent's workflow and
// turn, then their end; the activity's result (what history records)
// holds no delta.
func TestModelActivityPublishesDeltas(t *testing.T) {
	const answer = "A long answer, streamed in pieces of sixteen bytes, so that several deltas make it up."
	sc, err := scripted.ParseScenario([]byte("rules:\n  - {name: talk, respond: {text: \"" + answer + "\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.New(sc)
	base, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, api := range []model.API{model.APIResponses, model.APIChat} {
		t.Run(string(api), func(t *testing.T) {
			m, err := model.New(model.Config{APIKey: "test", BaseURL: base, API: api})
			if err != nil {
				t.Fatal(err)
			}
			store, err := blob.Open(context.Background(), "mem://")
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			bus := events.NewBus()
			g := agents.MustGraph("talk", "talker", &agents.Agent{Name: "talker", Instructions: "talk"})
			r, err := NewRunner(Config{Graphs: []*agents.Graph{g}, Model: m, Store: store, Events: bus})
			if err != nil {
				t.Fatal(err)
			}
			deltas, unsubscribe := bus.Subscribe("run-1", false, true, 4096)
			defer unsubscribe()
			recorded, unsubscribeEvents := bus.Subscribe("run-1", true, false, 4096)
			defer unsubscribeEvents()
			out, err := r.Activities().Model(context.Background(), ModelInput{Graph: "talk", Agent: "talker",
				Run:        agents.RunContext{WorkflowID: "run-1/0-talker", RunID: "run-1", Agent: "talker", Turn: 3},
				Transcript: runtime.TranscriptRef{Key: "transcripts/run-1/0-talker"}, Pending: []agents.Item{agents.UserMessage("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			n := 0
			for done := false; !done; {
				select {
				case e := <-deltas:
					switch e.Kind {
					case troupe.EventTextDelta:
						n++
						text.WriteString(e.Detail)
						if e.WorkflowID != "run-1/0-talker" || e.Agent != "talker" || e.Turn != 3 || e.Seq != 0 {
							t.Errorf("delta %+v; want one of run-1/0-talker's turn 3, numbered 0", e)
						}
					case troupe.EventTextEnd:
						done = true
					}
				default:
					t.Fatal("the bus holds no end of the call's deltas after the activity returned")
				}
			}
			if text.String() != answer || n < 3 {
				t.Errorf("%d deltas adding up to %q; want several adding up to %q", n, text.String(), answer)
			}
			if len(recorded) != 0 {
				t.Errorf("the activity published %d recorded events; want none", len(recorded))
			}
			res, _ := json.Marshal(out)
			if strings.Contains(string(res), troupe.EventTextDelta) || out.Text != answer {
				t.Errorf("activity result %s: want the turn, and no delta", res)
			}
		})
	}
}
