package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// Transcripts reads and writes transcripts in a blob store, keeping the
// decoded segments it has read (with their output references resolved) so
// that each model turn decodes only the segments it has not seen: without
// it, a run's decoding work would grow with the square of its turns.
//
// Only reads fill the cache, for the reason blob.Store gives: a segment
// is read only after the workflow accepted the attempt that wrote it. The
// segment a turn writes is read by the next, and a file store spares that
// read: the segment written is kept (its bytes, and its file held open)
// until read, and taken as read when the store still holds that very file
// (blob.Written.Unchanged), which is exactly when a read would return it.
type Transcripts struct {
	store *blob.Store

	mu sync.Mutex
	// segs are the segments read, by the key they are under (a
	// transcript's or a base's) and by number; order is the order they
	// were read in, for eviction, and n how many segs holds.
	segs  map[string]*held
	order []segID
	n     int
	max   int
	// written are the segments written and not yet read, by blob key, and
	// wrote their keys in the order written (at most maxWritten held).
	written map[string]*written
	wrote   []string
}

// held are the cached segments under one key: segs[i] is segment i.
type held struct {
	segs []cached
	n    int
}

type cached struct {
	items []agents.Item
	ok    bool
}

type segID struct {
	key string
	i   int
}

// written is a segment as written, held until the turn after reads it.
type written struct {
	data []byte
	file *blob.Written
}

// maxWritten bounds the segments held as written: one per agent loop
// running on the worker would do; each holds a file open.
const maxWritten = 128

// NewTranscripts returns the transcripts of store.
func NewTranscripts(store *blob.Store) *Transcripts {
	return &Transcripts{store: store, segs: map[string]*held{}, max: 20000, written: map[string]*written{}}
}

// Append writes items as the next segment of ref and returns the longer
// transcript. Writing the same segment again (an activity retry) replaces
// it, so Append is idempotent per segment number.
func (t *Transcripts) Append(ctx context.Context, ref runtime.TranscriptRef, items []agents.Item) (runtime.TranscriptRef, error) {
	data, err := json.Marshal(items)
	if err != nil {
		return ref, fmt.Errorf("runtime: transcript segment: %w", err)
	}
	// The new segment is ref's own, under its Key, whatever its bases.
	key := runtime.TranscriptRef{Key: ref.Key}.SegmentKey(ref.Segments)
	file, err := t.store.PutWritten(ctx, key, data)
	if err != nil {
		return ref, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
	}
	t.mu.Lock()
	t.forget(ref.Key, ref.Segments)
	if old := t.written[key]; old != nil {
		old.file.Close()
		delete(t.written, key)
	}
	if file != nil {
		t.written[key] = &written{data: data, file: file}
		t.wrote = append(t.wrote, key)
		for len(t.written) > maxWritten && len(t.wrote) > 0 {
			// A key written again stands twice in wrote; closing its
			// segment early only costs a read.
			if w := t.written[t.wrote[0]]; w != nil {
				w.file.Close()
				delete(t.written, t.wrote[0])
			}
			t.wrote = t.wrote[1:]
		}
	}
	t.mu.Unlock()
	ref.Segments++
	return ref, nil
}

// Close releases the files of the segments held as written. The
// Transcripts stays usable: a segment written later is held again.
func (t *Transcripts) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, w := range t.written {
		w.file.Close()
		delete(t.written, key)
	}
	t.wrote = nil
	return nil
}

// Load reads every segment of ref, in order, with output references
// resolved, whatever view ref has. The returned slice is the caller's to
// change.
func (t *Transcripts) Load(ctx context.Context, ref runtime.TranscriptRef) ([]agents.Item, error) {
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
func (t *Transcripts) LoadView(ctx context.Context, ref runtime.TranscriptRef, pending []agents.Item) (items []agents.Item, at []runtime.ItemPos, err error) {
	pending, err = ResolveOutputs(ctx, t.store, append([]agents.Item(nil), pending...))
	if err != nil {
		return nil, nil, err
	}
	add := func(seg int, first int, list []agents.Item) {
		for i := first; i < len(list); i++ {
			items = append(items, list[i])
			at = append(at, runtime.ItemPos{Segment: seg, Item: i})
		}
	}
	v := ref.View
	if v == nil {
		segs, err := t.segments(ctx, ref, 0, ref.Segments)
		if err != nil {
			return nil, nil, err
		}
		// Sized once: a long transcript would be copied again and again
		// as the slices grew.
		n := len(pending)
		for _, seg := range segs {
			n += len(seg)
		}
		items, at = make([]agents.Item, 0, n), make([]runtime.ItemPos, 0, n)
		for s, seg := range segs {
			add(s, 0, seg)
		}
		add(ref.Segments, 0, pending)
		return items, at, nil
	}
	for _, p := range v.Head {
		segs, err := t.segments(ctx, ref, p.Segment, p.Segment+1)
		if err != nil {
			return nil, nil, err
		}
		seg := segs[0]
		if p.Item < 0 || p.Item >= len(seg) {
			return nil, nil, fmt.Errorf("runtime: transcript %s: view names item %d of segment %d, which has %d", ref.Key, p.Item, p.Segment, len(seg))
		}
		items = append(items, seg[p.Item])
		at = append(at, p)
	}
	items = append(items, agents.UserMessage(v.Note))
	at = append(at, runtime.ItemPos{Segment: -1, Item: -1})
	tailFrom := len(items)
	tail, err := t.segments(ctx, ref, v.From.Segment, ref.Segments)
	if err != nil {
		return nil, nil, err
	}
	for k, seg := range tail {
		first := 0
		if k == 0 {
			first = v.From.Item
		}
		add(v.From.Segment+k, first, seg)
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

// segments returns segments from to to (excluded) of ref, in order: those
// cached, found under one lock, then the others read in order.
func (t *Transcripts) segments(ctx context.Context, ref runtime.TranscriptRef, from, to int) ([][]agents.Item, error) {
	if to <= from {
		return nil, nil
	}
	out := make([][]agents.Item, to-from)
	var missing []int
	t.mu.Lock()
	key, h := "", (*held)(nil)
	for i := from; i < to; i++ {
		if k := ref.SegmentHolder(i); k != key || h == nil {
			key, h = k, t.segs[k]
		}
		if h != nil && i >= 0 && i < len(h.segs) && h.segs[i].ok {
			out[i-from] = h.segs[i].items
		} else {
			missing = append(missing, i)
		}
	}
	t.mu.Unlock()
	for _, i := range missing {
		seg, err := t.read(ctx, ref, i)
		if err != nil {
			return nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
		}
		out[i-from] = seg
	}
	return out, nil
}

// read reads segment i of ref and caches it: from the segment as this
// worker wrote it, if the store still holds that, else from the store.
func (t *Transcripts) read(ctx context.Context, ref runtime.TranscriptRef, i int) ([]agents.Item, error) {
	holder := ref.SegmentHolder(i)
	key := ref.SegmentKey(i)
	t.mu.Lock()
	w := t.written[key]
	delete(t.written, key)
	t.mu.Unlock()
	var data []byte
	if w != nil {
		if w.file.Unchanged() {
			data = w.data
		}
		w.file.Close()
	}
	if data == nil {
		var err error
		if data, err = t.store.Get(ctx, key); err != nil {
			return nil, err
		}
	}
	var seg []agents.Item
	if err := json.Unmarshal(data, &seg); err != nil {
		return nil, fmt.Errorf("segment %s: %w", key, err)
	}
	seg, err := ResolveOutputs(ctx, t.store, seg)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		return seg, nil // never: segments count from 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.segs[holder]
	if h == nil {
		h = &held{}
		t.segs[holder] = h
	}
	if i >= len(h.segs) {
		h.segs = append(h.segs, make([]cached, i+1-len(h.segs))...)
	}
	if !h.segs[i].ok {
		t.order = append(t.order, segID{holder, i})
		h.n++
		t.n++
	}
	h.segs[i] = cached{items: seg, ok: true}
	for t.n > t.max && len(t.order) > 0 {
		t.evict(t.order[0])
		t.order = t.order[1:]
	}
	return seg, nil
}

// forget drops segment i of key from the cache (t.mu held).
func (t *Transcripts) forget(key string, i int) {
	h := t.segs[key]
	if h == nil || i < 0 || i >= len(h.segs) || !h.segs[i].ok {
		return
	}
	h.segs[i] = cached{}
	h.n--
	t.n--
	if h.n == 0 {
		delete(t.segs, key)
	}
}

// evict drops a segment read earliest (t.mu held). A segment forgotten
// and read again stands twice in order; evicting it early is harmless.
func (t *Transcripts) evict(id segID) { t.forget(id.key, id.i) }

// ResolveOutputs replaces each item's OutputRef with the output it names,
// and each message's ContentRef with the text it names.
func ResolveOutputs(ctx context.Context, store *blob.Store, items []agents.Item) ([]agents.Item, error) {
	for i := range items {
		if items[i].ContentRef != "" {
			data, err := store.Get(ctx, items[i].ContentRef)
			if err != nil {
				return nil, fmt.Errorf("runtime: the message stored apart as %s: %w", items[i].ContentRef, err)
			}
			items[i].Content = string(data)
			items[i].ContentRef = ""
		}
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
