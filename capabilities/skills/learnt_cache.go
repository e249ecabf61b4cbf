package skills

// The cache of learnt skills: what a capability found in each version of
// a learnt skill's SKILL.md, and what it has reported, kept across calls
// (and, when the worker shares one, across agents) so that a model call
// whose learnt skills have not changed reads nothing but the listing.

import (
	"container/list"
	"sync"
)

// DefaultLearntCacheBytes is the size of a LearntCache made with no size:
// some 40,000 learnt skills' names and descriptions of a typical length,
// a few hundred memory scopes of a hundred skills.
const DefaultLearntCacheBytes = 16 << 20

// LearntCache keeps, for capabilities bound to learnt skills (WithLearnt),
// what they found in each SKILL.md, by the file's folder, its
// LearntFile.Version and the capability's Limits (the skill's name and
// description, or the rule it breaks), and which skipped skills they
// reported. A call whose listing gives the Versions it gave before reads
// no file, and reports no skill it reported before. It holds at most its
// size in bytes, dropping what was used least recently. It is safe for
// concurrent use; its zero value is not: make one with NewLearntCache.
type LearntCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // of *cached, the most recently used first
	items map[string]*list.Element
}

// cached is one item of a LearntCache: a SKILL.md's entry, or a mark
// that something was reported (entry nil).
type cached struct {
	key   string
	entry *learntEntry
	size  int64
}

// learntEntry is what one SKILL.md makes of its folder: a skill's name
// and description, or err, the rule it breaks.
type learntEntry struct {
	name, description string
	err               error
}

// NewLearntCache returns a cache of at most maxBytes (an estimate of the
// memory its items take); zero or less means DefaultLearntCacheBytes.
func NewLearntCache(maxBytes int64) *LearntCache {
	if maxBytes <= 0 {
		maxBytes = DefaultLearntCacheBytes
	}
	return &LearntCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

// Once reports whether key is new to c, and remembers it: a Learnt calls
// it to log what it finds wrong with a listing (a listing cut at its
// bound, say) once per version of it rather than at every call. A key
// that c dropped for room is new again.
func (c *LearntCache) Once(key string) bool {
	return c.mark("once\x00" + key)
}

// mark remembers key, and reports whether it was new.
func (c *LearntCache) mark(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return false
	}
	c.add(&cached{key: key, size: int64(len(key)) + cachedOverhead})
	return true
}

// entry returns the entry cached under key.
func (c *LearntCache) entry(key string) (*learntEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	it := el.Value.(*cached)
	return it.entry, it.entry != nil
}

// put caches e under key.
func (c *LearntCache) put(key string, e *learntEntry) {
	size := int64(len(key)+len(e.name)+len(e.description)) + cachedOverhead
	if e.err != nil {
		size += int64(len(e.err.Error()))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.size -= el.Value.(*cached).size
		c.order.Remove(el)
		delete(c.items, key)
	}
	c.add(&cached{key: key, entry: e, size: size})
}

// cachedOverhead is a rough count of the bytes an item takes besides its
// strings: the list element, the map's slot, the structs.
const cachedOverhead = 160

// add adds it and drops the least recently used items past c's size;
// c.mu is held.
func (c *LearntCache) add(it *cached) {
	c.items[it.key] = c.order.PushFront(it)
	c.size += it.size
	for c.size > c.max && c.order.Len() > 1 {
		old := c.order.Back()
		c.order.Remove(old)
		o := old.Value.(*cached)
		delete(c.items, o.key)
		c.size -= o.size
	}
}
