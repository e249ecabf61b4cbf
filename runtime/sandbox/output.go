package sandbox

// Command plumbing shared by backends: request defaults and the output cap
// that keeps a command's head and tail.

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of an ExecRequest's zero fields.
const (
	// DefaultTimeout bounds a command whose request sets no Timeout.
	DefaultTimeout = time.Minute
	// DefaultMaxOutputBytes caps the output of a command whose request
	// sets no MaxOutputBytes.
	DefaultMaxOutputBytes = 64 << 10
)

// Normalize returns r with its defaults filled in (DefaultTimeout,
// DefaultMaxOutputBytes) and its Workdir clean ("." for the workspace
// root), or an error wrapping ErrPathEscape when Workdir leaves the
// workspace. Backends call it first; whether Workdir exists is checked on
// the host (host.Workspace.ResolveWorkdir).
func (r ExecRequest) Normalize() (ExecRequest, error) {
	if r.Workdir == "" {
		r.Workdir = "."
	}
	wd, err := CleanPath(r.Workdir)
	if err != nil {
		return r, fmt.Errorf("sandbox: workdir: %w", err)
	}
	r.Workdir = wd
	for k, v := range r.Env {
		if k == "" || k[0] == '-' || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return r, fmt.Errorf("sandbox: environment variable %q: a name must be non-empty, not begin with '-' and hold no '=' or NUL, a value no NUL", k)
		}
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.MaxOutputBytes <= 0 {
		r.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return r, nil
}

// CapOutput returns out as text when it is at most max bytes long.
// Otherwise it keeps the first max/2 and the last max-max/2 bytes (less up
// to three bytes each, so no UTF-8 character is cut in two) and puts a
// marker line between them:
//
//	…[N bytes truncated]…
//
// where N counts the bytes left out; truncated is then true. The marker is
// not counted in max. With max <= 0 only the marker is kept.
func CapOutput(out []byte, max int) (text string, truncated bool) {
	c := NewCappedOutput(max)
	c.Write(out)
	text, truncated, _ = c.Result()
	return text, truncated
}

// CappedOutput is an io.Writer that keeps what CapOutput would keep of
// everything written to it, in memory bounded by about twice its cap
// whatever the volume written. Backends write a command's stdout and
// stderr to one CappedOutput. It is safe for concurrent use.
type CappedOutput struct {
	mu       sync.Mutex
	headCap  int
	tailCap  int
	head     []byte
	tail     []byte // The last bytes written, at most 2*tailCap.
	total    int
	overflow bool // More than headCap+tailCap bytes were written.
}

// NewCappedOutput returns a CappedOutput that keeps max bytes, head and
// tail.
func NewCappedOutput(max int) *CappedOutput {
	if max < 0 {
		max = 0
	}
	return &CappedOutput{headCap: max / 2, tailCap: max - max/2}
}

// Write keeps what it must of p; it never fails.
func (c *CappedOutput) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += n
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= c.tailCap {
		c.tail = append(c.tail[:0], p[len(p)-c.tailCap:]...)
	} else {
		c.tail = append(c.tail, p...)
		if len(c.tail) > 2*c.tailCap {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailCap:]...)
		}
	}
	if c.total > c.headCap+c.tailCap {
		c.overflow = true
	}
	return n, nil
}

// Result returns the kept text, whether the middle was cut, and how many
// bytes were written in all.
func (c *CappedOutput) Result() (text string, truncated bool, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.overflow {
		return string(c.head) + string(c.tail), false, c.total
	}
	head := c.head
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	head = head[:completeRunes(head)]
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	cut := c.total - len(head) - len(tail)
	sep := ""
	if len(head) > 0 && head[len(head)-1] != '\n' {
		sep = "\n"
	}
	return fmt.Sprintf("%s%s…[%d bytes truncated]…\n%s", head, sep, cut, tail), true, c.total
}

// completeRunes returns the length of b without a UTF-8 character cut off
// at its end.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
