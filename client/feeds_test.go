package client

import (
	"context"
	"errors"
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

// fakeFeed is a live feed's answers as followFeed sees them: the items it
// holds (numbered from 1), and errors for the requests it fails.
type fakeFeed struct {
	items []troupe.Event
	fail  []error // the next requests' errors, in order; nil answers
	asked []troupe.LiveRequest
}

func (f *fakeFeed) query(_ context.Context, _ string, req troupe.LiveRequest) (troupe.LivePage, error) {
	f.asked = append(f.asked, req)
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		if err != nil {
			return troupe.LivePage{}, err
		}
	}
	p := troupe.LivePage{Watch: "w", Next: req.After}
	if req.Watch != "w" {
		p.Next = 0
	}
	for i := int(p.Next); i < len(f.items); i++ {
		p.Events = append(p.Events, f.items[i])
		p.Next = uint64(i + 1)
	}
	return p, nil
}

func TestFollowFeedKeepsItsPlace(t *testing.T) {
	delta := func(text string) troupe.Event {
		return troupe.Event{Kind: troupe.EventTextDelta, WorkflowID: "run/0-a", Turn: 1, Detail: text}
	}
	texts := func(ch chan troupe.Event) string {
		var got []string
		for len(ch) > 0 {
			got = append(got, (<-ch).Detail)
		}
		return strings.Join(got, "")
	}
	lost := errors.New("query lost on a loaded machine")

	t.Run("a request that fails is tried again at once, from where it was", func(t *testing.T) {
		f := &fakeFeed{items: []troupe.Event{delta("one "), delta("two ")}}
		ch := make(chan troupe.Event, 16)
		ctx, cancel := context.WithCancel(context.Background())
		f.fail = []error{nil, lost, lost}
		place := &feedPlace{}
		done := make(chan error, 1)
		go func() {
			done <- followFeed(ctx, func(qctx context.Context, id string, req troupe.LiveRequest) (troupe.LivePage, error) {
				if len(f.asked) == 1 {
					f.items = append(f.items, delta("three"))
				}
				if len(f.asked) == 4 {
					cancel() // the run ends: the next request is the last
				}
				return f.query(qctx, id, req)
			}, "feed", "run", place, feedStreams{events: ch, deltas: true, quit: make(chan struct{})})
		}()
		if err := <-done; err != nil {
			t.Fatalf("followFeed: %v; want nil (two failures in a row are under feedRetries)", err)
		}
		if got := texts(ch); got != "one two three" {
			t.Errorf("the follower got %q; want %q, each once", got, "one two three")
		}
	})

	t.Run("a feed that failed is read a last time from its place", func(t *testing.T) {
		f := &fakeFeed{items: []troupe.Event{delta("one ")}}
		ch := make(chan troupe.Event, 16)
		place := &feedPlace{}
		f.fail = []error{nil}
		for range feedRetries {
			f.fail = append(f.fail, lost)
		}
		err := followFeed(context.Background(), f.query, "feed", "run", place, feedStreams{events: ch, deltas: true, quit: make(chan struct{})})
		if !errors.Is(err, lost) {
			t.Fatalf("followFeed: %v; want the feed's error after %d failures in a row", err, feedRetries)
		}
		if !place.answered || place.req.After != 1 {
			t.Fatalf("place %+v; want the feed answered, after item 1", place)
		}
		// The rest of the turn's text came while the feed was failing; the
		// run ends before it is tried again.
		f.items = append(f.items, delta("two"), troupe.Event{Kind: troupe.EventTextEnd, WorkflowID: "run/0-a", Turn: 1})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := followFeed(ctx, f.query, "feed", "run", place, feedStreams{events: ch, deltas: true, quit: make(chan struct{})}); err != nil {
			t.Fatalf("the last reading: %v", err)
		}
		if got := texts(ch); got != "one two" {
			t.Errorf("the follower got %q; want %q, each once", got, "one two")
		}
		if last := f.asked[len(f.asked)-1]; last.Watch != "w" || last.After != 1 || last.WaitMS != 0 {
			t.Errorf("the last reading asked %+v; want from item 1 of watch w, held by nothing", last)
		}
	})
}
