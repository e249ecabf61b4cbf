package capabilities

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Defaults of CompactionConfig.
const (
	// DefaultCompactionMaxItems is the item count past which the context
	// is trimmed.
	DefaultCompactionMaxItems = 400
	// DefaultCompactionMaxBytes is the size past which the context is
	// trimmed: about 100k tokens at BytesPerToken, which leaves room for
	// instructions, tools and the answer in a 128k-token model.
	DefaultCompactionMaxBytes = 400_000
	// DefaultCompactionKeepLast is how many recent items a trim keeps.
	DefaultCompactionKeepLast = 40
)

// imageCost is what an image counts for in a context's size: the model
// sees an image as about 1,500 tokens, whatever its size in bytes.
const imageCost = 1500 * BytesPerToken

// CompactionConfig says when Compaction trims and what it keeps. Zero
// fields take the defaults; a negative MaxItems or MaxBytes turns that
// bound off.
type CompactionConfig struct {
	// MaxItems is the most items the context may hold before it is
	// trimmed; default DefaultCompactionMaxItems.
	MaxItems int
	// MaxBytes is the most bytes of text the context may hold before it is
	// trimmed (each image counts as about 1,500 tokens); default
	// DefaultCompactionMaxBytes.
	MaxBytes int
	// KeepLast is how many of the most recent items a trim keeps, moved
	// to the nearest turn boundary, and fewer if they still exceed
	// MaxBytes; default DefaultCompactionKeepLast.
	KeepLast int
}

// withDefaults fills the zero fields.
func (c CompactionConfig) withDefaults() CompactionConfig {
	if c.MaxItems == 0 {
		c.MaxItems = DefaultCompactionMaxItems
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultCompactionMaxBytes
	}
	if c.KeepLast <= 0 {
		c.KeepLast = DefaultCompactionKeepLast
	}
	return c
}

// Compaction trims an agent's context before each model call once it
// holds more than MaxItems items or MaxBytes bytes (see CompactionConfig).
// The result implements agents.Compactor. A trim keeps:
//
//   - the messages before and including the first user message (the task);
//   - one note, a user message saying how many earlier items were trimmed;
//   - the most recent items, from a turn boundary on: about KeepLast
//     items, fewer if they exceed MaxBytes, but always the latest turn.
//
// The turn structure stays valid: a function call and its output are
// kept or dropped together, and a model turn (reasoning, message and
// calls) is never split. Trim is a pure function of its input; the
// transcript itself is left whole, only the model's view is trimmed.
func Compaction(cfg CompactionConfig) agents.Capability {
	return &compaction{cfg: cfg.withDefaults()}
}

type compaction struct {
	cfg CompactionConfig
}

func (c *compaction) Name() string               { return "compaction" }
func (c *compaction) Instructions() string       { return "" }
func (c *compaction) Tools() []agents.Tool       { return nil }
func (c *compaction) Manifest() sandbox.Manifest { return sandbox.Manifest{} }

// noteText is the note a trim inserts; notePattern reads one back, so that
// trimming an already trimmed context counts the earlier trim too.
const noteText = "[Context trimmed: %d earlier items of this conversation were removed to stay within the context limit. The task above and the most recent items are kept; redo any work whose results you no longer see.]"

var notePattern = regexp.MustCompile(`^\[Context trimmed: (\d+) earlier items`)

// Trim implements agents.Compactor.
func (c *compaction) Trim(items []agents.Item) []agents.Item {
	out, _, _, _ := c.Window(items)
	return out
}

// Window implements agents.WindowCompactor: it trims as Trim does and
// says which items the trim kept, so that the runtime can load only those
// (and what follows them) on later turns.
func (c *compaction) Window(items []agents.Item) (out []agents.Item, head []int, from int, trimmed bool) {
	total := 0
	for _, it := range items {
		total += itemSize(it)
	}
	if !over(c.cfg.MaxItems, len(items)) && !over(c.cfg.MaxBytes, total) {
		return items, nil, 0, false
	}

	// The head: the first user message (a note of an earlier trim aside)
	// and the system and developer messages before it.
	first := -1
	for i, it := range items {
		if _, isNote := noteCount(it); it.Type == agents.ItemMessage && it.Role == agents.RoleUser && !isNote {
			first = i
			break
		}
	}
	for i, it := range items[:first+1] {
		if it.Type == agents.ItemMessage && it.Role != agents.RoleAssistant {
			if _, isNote := noteCount(it); !isNote {
				head = append(head, i)
			}
		}
	}

	// The cuts: where the kept tail may start, at least one item after
	// the head.
	var cuts []int
	for i := first + 2; i < len(items); i++ {
		if validCut(items, i) {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) == 0 {
		return items, nil, 0, false
	}
	// Start at the first cut that keeps at most KeepLast items, then move
	// later while the result is still too big; the last cut keeps the
	// latest turn whatever its size.
	k := len(cuts) - 1
	for i, cut := range cuts {
		if cut >= len(items)-c.cfg.KeepLast {
			k = i
			break
		}
	}
	headSize := itemSize(agents.UserMessage(noteText))
	for _, i := range head {
		headSize += itemSize(items[i])
	}
	for ; k < len(cuts)-1; k++ {
		size := headSize
		for _, it := range items[cuts[k]:] {
			size += itemSize(it)
		}
		if !over(c.cfg.MaxBytes, size) && !over(c.cfg.MaxItems, len(head)+1+len(items)-cuts[k]) {
			break
		}
	}
	cut := cuts[k]

	// Count what is dropped, including what earlier trims dropped.
	dropped := cut - len(head)
	for _, it := range items[:cut] {
		if n, ok := noteCount(it); ok {
			dropped += n - 1 // the note itself is not a trimmed item
		}
	}
	out = make([]agents.Item, 0, len(head)+1+len(items)-cut)
	for _, i := range head {
		out = append(out, items[i])
	}
	out = append(out, agents.UserMessage(fmt.Sprintf(noteText, dropped)))
	out = append(out, agents.PairCalls(items[cut:])...)
	return out, head, cut, true
}

// over reports whether n exceeds limit; a negative limit is no limit.
func over(limit, n int) bool { return limit >= 0 && n > limit }

// noteCount reads the count of a note left by an earlier trim.
func noteCount(it agents.Item) (int, bool) {
	if it.Type != agents.ItemMessage || it.Role != agents.RoleUser {
		return 0, false
	}
	m := notePattern.FindStringSubmatch(it.Content)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// fromModel reports whether an item is part of a model turn's output.
func fromModel(it agents.Item) bool {
	return it.Type == agents.ItemReasoning || it.Type == agents.ItemFunctionCall ||
		(it.Type == agents.ItemMessage && it.Role == agents.RoleAssistant)
}

// validCut reports whether a kept tail may start at items[i]: not on a
// function call output (its call would be dropped), and not inside a
// model turn (a reasoning item must stay with what follows it).
func validCut(items []agents.Item, i int) bool {
	if items[i].Type == agents.ItemFunctionCallOutput {
		return false
	}
	return !(fromModel(items[i]) && fromModel(items[i-1]))
}

// itemSize estimates what an item costs in the model's context.
func itemSize(it agents.Item) int {
	n := len(it.Content) + len(it.Arguments) + len(it.Summary) + len(it.Name) + len(it.EncryptedContent)/4
	if strings.HasPrefix(it.Output, imageOutputPrefix) {
		n += imageCost // the image's text is short
	} else {
		n += len(it.Output)
	}
	n += len(it.Images) * imageCost
	return n + 16 // the item's own framing
}
