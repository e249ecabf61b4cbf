package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// TranscriptRef names a transcript in the blob store: the segments
// Key/000000 up to Key/<Segments-1>.
type TranscriptRef struct {
	// Key is the blob-key prefix of the transcript's segments.
	Key string `json:"key"`
	// Segments is how many segments the transcript has.
	Segments int `json:"segments"`
	// View, when set, is the model's window on the transcript since its
	// agent's compactor last trimmed it (see agents.WindowCompactor):
	// later turns load only the items it names.
	View *TranscriptView `json:"view,omitempty"`
	// Bases, when set, hold the transcript's first segments elsewhere: a
	// fork (Fork) reads the segments it shares with its source where the
	// source wrote them, and writes its own under Key. In order; each
	// holds the segments from the one before's end up to its Segments.
	Bases []TranscriptBase `json:"bases,omitempty"`
}

// TranscriptBase is where a forked transcript's first segments are: the
// segments below Segments not held by an earlier base are under Key.
type TranscriptBase struct {
	Key      string `json:"key"`
	Segments int    `json:"segments"`
}

// Fork returns a transcript that starts as ref does, sharing its segments
// (copy-on-write: nothing is copied), and goes on under key: what either
// appends later, the other does not see.
func (ref TranscriptRef) Fork(key string) TranscriptRef {
	f := ref
	f.Key = key
	f.Bases = append(append([]TranscriptBase(nil), ref.Bases...), TranscriptBase{Key: ref.Key, Segments: ref.Segments})
	if ref.View != nil {
		v := *ref.View
		f.View = &v
	}
	return f
}

// segmentKey is the blob key of segment i of ref.
func (ref TranscriptRef) segmentKey(i int) string {
	for _, b := range ref.Bases {
		if i < b.Segments {
			return segmentKey(b.Key, i)
		}
	}
	return segmentKey(ref.Key, i)
}

// ItemPos is where an item sits in a transcript: its segment and its index
// in that segment.
type ItemPos struct {
	Segment int `json:"segment"`
	Item    int `json:"item"`
}

// TranscriptView is what the model still sees of a trimmed transcript:
// the head items, the note the trim put after them, and every item from
// From on. Its size does not grow with the transcript.
type TranscriptView struct {
	// Agent is the agent whose compactor made the window: another agent
	// the transcript is handed to sees the whole conversation through
	// its own compactor, not this window.
	Agent string `json:"agent,omitempty"`
	// Head are the kept items of the conversation's start, in order.
	Head []ItemPos `json:"head,omitempty"`
	// Note is the text of the user message the trim put between the head
	// and the tail.
	Note string `json:"note"`
	// From is the first item of the kept tail.
	From ItemPos `json:"from"`
}

func segmentKey(key string, i int) string { return fmt.Sprintf("%s/%06d.json", key, i) }

// Transcripts reads and writes transcripts in a blob store, keeping the
// decoded segments it has read (with their output references resolved) so
// that each model turn decodes only the segments it has not seen: without
// it, a run's decoding work would grow with the square of its turns.
//
// Only reads fill the cache, for the reason blob.Store gives: a segment
// is read only after the workflow accepted the attempt that wrote it.
type Transcripts struct {
	store *blob.Store

	mu    sync.Mutex
	segs  map[string][]agents.Item
	order []string
	max   int
}

// NewTranscripts returns the transcripts of store.
func NewTranscripts(store *blob.Store) *Transcripts {
	return &Transcripts{store: store, segs: map[string][]agents.Item{}, max: 20000}
}

// Append writes items as the next segment of ref and returns the longer
// transcript. Writing the same segment again (an activity retry) replaces
// it, so Append is idempotent per segment number.
func (t *Transcripts) Append(ctx context.Context, ref TranscriptRef, items []agents.Item) (TranscriptRef, error) {
	data, err := json.Marshal(items)
	if err != nil {
		return ref, fmt.Errorf("runtime: transcript segment: %w", err)
	}
	key := segmentKey(ref.Key, ref.Segments)
	if err := t.store.Put(ctx, key, data); err != nil {
		return ref, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
	}
	t.mu.Lock()
	delete(t.segs, key)
	t.mu.Unlock()
	ref.Segments++
	return ref, nil
}

// Load reads every segment of ref, in order, with output references
// resolved, whatever view ref has. The returned slice is the caller's to
// change.
func (t *Transcripts) Load(ctx context.Context, ref TranscriptRef) ([]agents.Item, error) {
	ref.View = nil
	items, _, err := t.LoadView(ctx, ref, nil)
	return items, err
}

// LoadView reads what the model sees of ref followed by pending: the
// whole transcript when ref has no view, else the view's head, its note
// and the items from its tail on, with calls and outputs paired. Output
// references are resolved. Each item's position comes along in at (the
// note's is {-1, -1}; pending items are at segment ref.Segments, the one
// the turn will write), so a new window can be named in the transcript.
// The returned slices are the caller's to change.
func (t *Transcripts) LoadView(ctx context.Context, ref TranscriptRef, pending []agents.Item) (items []agents.Item, at []ItemPos, err error) {
	pending, err = ResolveOutputs(ctx, t.store, append([]agents.Item(nil), pending...))
	if err != nil {
		return nil, nil, err
	}
	add := func(seg int, first int, list []agents.Item) {
		for i := first; i < len(list); i++ {
			items = append(items, list[i])
			at = append(at, ItemPos{Segment: seg, Item: i})
		}
	}
	v := ref.View
	if v == nil {
		for s := 0; s < ref.Segments; s++ {
			seg, err := t.segment(ctx, ref.segmentKey(s))
			if err != nil {
				return nil, nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
			}
			add(s, 0, seg)
		}
		add(ref.Segments, 0, pending)
		return items, at, nil
	}
	for _, p := range v.Head {
		seg, err := t.segment(ctx, ref.segmentKey(p.Segment))
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
		}
		if p.Item < 0 || p.Item >= len(seg) {
			return nil, nil, fmt.Errorf("runtime: transcript %s: view names item %d of segment %d, which has %d", ref.Key, p.Item, p.Segment, len(seg))
		}
		items = append(items, seg[p.Item])
		at = append(at, p)
	}
	items = append(items, agents.UserMessage(v.Note))
	at = append(at, ItemPos{Segment: -1, Item: -1})
	tailFrom := len(items)
	for s := v.From.Segment; s < ref.Segments; s++ {
		seg, err := t.segment(ctx, ref.segmentKey(s))
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
		}
		first := 0
		if s == v.From.Segment {
			first = v.From.Item
		}
		add(s, first, seg)
	}
	add(ref.Segments, 0, pending)
	// The trim paired its tail; a call cut off from its output at the
	// tail's start must stay out on later turns too.
	paired := agents.Paired(items[tailFrom:])
	n := tailFrom
	for i := tailFrom; i < len(items); i++ {
		if paired(items[i]) {
			items[n], at[n] = items[i], at[i]
			n++
		}
	}
	items, at = items[:n], at[:n]
	return items, at, nil
}

// Window is the view of a transcript after a trim of the items that
// LoadView returned with their positions at: head are the indices of the
// kept head items, from that of the tail's first item, and note the text
// of the trim's note.
func Window(at []ItemPos, head []int, from int, note string) (*TranscriptView, error) {
	v := &TranscriptView{Note: note}
	for _, i := range head {
		if i < 0 || i >= len(at) || at[i].Segment < 0 {
			return nil, fmt.Errorf("runtime: a trim kept item %d as its head, which is not in the transcript", i)
		}
		v.Head = append(v.Head, at[i])
	}
	if from < 0 || from >= len(at) || at[from].Segment < 0 {
		return nil, fmt.Errorf("runtime: a trim kept its tail from item %d, which is not in the transcript", from)
	}
	v.From = at[from]
	return v, nil
}

func (t *Transcripts) segment(ctx context.Context, key string) ([]agents.Item, error) {
	t.mu.Lock()
	seg, ok := t.segs[key]
	t.mu.Unlock()
	if ok {
		return seg, nil
	}
	data, err := t.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &seg); err != nil {
		return nil, fmt.Errorf("segment %s: %w", key, err)
	}
	if seg, err = ResolveOutputs(ctx, t.store, seg); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if _, ok := t.segs[key]; !ok {
		t.order = append(t.order, key)
	}
	t.segs[key] = seg
	for len(t.order) > t.max {
		delete(t.segs, t.order[0])
		t.order = t.order[1:]
	}
	t.mu.Unlock()
	return seg, nil
}

// ResolveOutputs replaces each item's OutputRef with the output it names.
func ResolveOutputs(ctx context.Context, store *blob.Store, items []agents.Item) ([]agents.Item, error) {
	for i := range items {
		if items[i].OutputRef == "" {
			continue
		}
		data, err := store.Get(ctx, items[i].OutputRef)
		if err != nil {
			return nil, fmt.Errorf("runtime: output of call %s: %w", items[i].CallID, err)
		}
		items[i].Output = string(data)
		items[i].OutputRef = ""
	}
	return items, nil
}

// InlineLimit is the largest tool output carried inside a Temporal payload;
// larger outputs go to the blob store and travel as OutputRef.
const InlineLimit = 1024

// Offload stores a function-call output larger than InlineLimit under key
// and returns the item with OutputRef set instead of Output.
func Offload(ctx context.Context, store *blob.Store, key string, item agents.Item) (agents.Item, error) {
	if len(item.Output) <= InlineLimit {
		return item, nil
	}
	if err := store.Put(ctx, key, []byte(item.Output)); err != nil {
		return item, err
	}
	item.OutputRef = key
	item.Output = ""
	return item, nil
}
