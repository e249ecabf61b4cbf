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
// resolved. The returned slice is the caller's to change.
func (t *Transcripts) Load(ctx context.Context, ref TranscriptRef) ([]agents.Item, error) {
	var items []agents.Item
	for i := 0; i < ref.Segments; i++ {
		seg, err := t.segment(ctx, segmentKey(ref.Key, i))
		if err != nil {
			return nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
		}
		items = append(items, seg...)
	}
	return items, nil
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
