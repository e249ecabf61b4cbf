package runtime

import (
	"context"
	"encoding/json"
	"fmt"

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

// Append writes items as the next segment of ref and returns the longer
// transcript. Writing the same segment again (an activity retry) replaces
// it, so Append is idempotent per segment number.
func Append(ctx context.Context, store *blob.Store, ref TranscriptRef, items []agents.Item) (TranscriptRef, error) {
	data, err := json.Marshal(items)
	if err != nil {
		return ref, fmt.Errorf("runtime: transcript segment: %w", err)
	}
	if err := store.Put(ctx, segmentKey(ref.Key, ref.Segments), data); err != nil {
		return ref, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
	}
	ref.Segments++
	return ref, nil
}

// Load reads every segment of ref, in order, with output references
// resolved.
func Load(ctx context.Context, store *blob.Store, ref TranscriptRef) ([]agents.Item, error) {
	var items []agents.Item
	for i := 0; i < ref.Segments; i++ {
		data, err := store.Get(ctx, segmentKey(ref.Key, i))
		if err != nil {
			return nil, fmt.Errorf("runtime: transcript %s: %w", ref.Key, err)
		}
		var seg []agents.Item
		if err := json.Unmarshal(data, &seg); err != nil {
			return nil, fmt.Errorf("runtime: transcript %s segment %d: %w", ref.Key, i, err)
		}
		items = append(items, seg...)
	}
	return ResolveOutputs(ctx, store, items)
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
