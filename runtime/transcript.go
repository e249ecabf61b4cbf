package runtime

import (
	"fmt"
	"strconv"
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

// SegmentKey is the blob key of segment i of ref: under the base that
// holds it, if one does, else under Key.
func (ref TranscriptRef) SegmentKey(i int) string {
	return segmentKey(ref.SegmentHolder(i), i)
}

// SegmentHolder is the key that segment i of ref is under (its blob key
// is that key, a slash and the segment's file name): the Key of the base
// that holds it, if one does, else ref's Key.
func (ref TranscriptRef) SegmentHolder(i int) string {
	for _, b := range ref.Bases {
		if i < b.Segments {
			return b.Key
		}
	}
	return ref.Key
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

// segmentKey is key/NNNNNN.json, i in six digits at least, as
// fmt.Sprintf("%s/%06d.json", key, i) has it, at a fraction of its cost:
// a turn may name every segment of its transcript.
func segmentKey(key string, i int) string {
	if i < 0 {
		return fmt.Sprintf("%s/%06d.json", key, i) // never: segments count from 0
	}
	d := strconv.Itoa(i)
	return key + "/" + "000000"[:max(0, 6-len(d))] + d + ".json"
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
