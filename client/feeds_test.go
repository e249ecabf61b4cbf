package client

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe"
)

func TestDeltaOrder(t *testing.T) {
	delta := func(wf string, turn int, text string) troupe.Event {
		return troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: wf, Turn: turn, Detail: text}
	}
	end := func(wf string, turn int) troupe.Event {
		return troupe.Event{Kind: troupe.EventTextEnd, WorkflowID: wf, Turn: turn}
	}
	turn := func(wf string, turn, seq int) troupe.Event {
		return troupe.Event{Kind: troupe.EventTurn, WorkflowID: wf, Turn: turn, Seq: seq}
	}
	show := func(e troupe.Event) string {
		if e.Kind == troupe.EventTextDelta {
			return e.Detail
		}
		return fmt.Sprintf("%s#%d", e.Kind, e.Turn)
	}

	t.Run("a model_turn waits for the rest of its deltas from a feed", func(t *testing.T) {
		relayed := make(chan troupe.Event, 8)
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, relayed, time.Hour, nil)
		o.delta(delta("a", 1, "one "))
		relayed <- delta("a", 1, "two ")
		relayed <- delta("b", 4, "other ")
		relayed <- end("a", 1)
		o.event(turn("a", 1, 7))
		want := "one |two |other |model_turn#1"
		if strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
	})
	t.Run("a feed's recorded events read while a model_turn waits are kept for later", func(t *testing.T) {
		fed := make(chan troupe.Event, 8)
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, fed, time.Hour, nil)
		o.delta(delta("a", 1, "one "))
		fed <- troupe.Event{Kind: troupe.EventToolCalled, WorkflowID: "b", Seq: 4}
		fed <- delta("a", 1, "two ")
		fed <- end("a", 1)
		o.event(turn("a", 1, 7))
		if want := "one |two |model_turn#1"; strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
		if len(o.later) != 1 || o.later[0].Kind != troupe.EventToolCalled {
			t.Errorf("later holds %+v; want the tool_called event read on the way", o.later)
		}
	})
	t.Run("deltas after their model_turn are dropped", func(t *testing.T) {
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, nil, time.Hour, nil)
		o.event(turn("a", 1, 3))
		o.delta(delta("a", 1, "late"))
		o.delta(delta("a", 2, "next turn"))
		o.event(turn("a", 2, 5))
		o.delta(delta("a", 1, "later"))
		want := "model_turn#1|next turn|model_turn#2"
		if strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
	})
	t.Run("a turn whose deltas ended, or that had none, goes at once", func(t *testing.T) {
		relayed := make(chan troupe.Event) // nothing ever comes
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, relayed, time.Hour, nil)
		o.delta(delta("a", 1, "x"))
		o.delta(end("a", 1))
		o.event(turn("a", 1, 1))
		o.event(turn("a", 2, 2))
		o.event(troupe.Event{Kind: troupe.EventToolCalled, WorkflowID: "a", Seq: 3})
		want := "x|model_turn#1|model_turn#2|tool_called#0"
		if strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
	})
	t.Run("a follower that stops waits for no feed", func(t *testing.T) {
		done := make(chan struct{})
		close(done)
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, make(chan troupe.Event), time.Hour, done)
		o.delta(delta("a", 1, "cut "))
		o.event(turn("a", 1, 1)) // would wait an hour for the end
		if want := "cut |model_turn#1"; strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
	})
	t.Run("a retried call's deltas all precede the turn", func(t *testing.T) {
		relayed := make(chan troupe.Event, 8)
		var got []string
		o := newDeltaOrder(func(e troupe.Event) { got = append(got, show(e)) }, relayed, time.Hour, nil)
		o.delta(delta("a", 1, "attempt1 "))
		o.delta(end("a", 1))
		o.event(troupe.Event{Kind: troupe.EventModelRetry, WorkflowID: "a", Turn: 1, Seq: 2})
		o.delta(delta("a", 1, "attempt2 "))
		relayed <- end("a", 1)
		o.event(turn("a", 1, 3))
		want := "attempt1 |model_retry#1|attempt2 |model_turn#1"
		if strings.Join(got, "|") != want {
			t.Errorf("fn got %q; want %q", strings.Join(got, "|"), want)
		}
	})
}
