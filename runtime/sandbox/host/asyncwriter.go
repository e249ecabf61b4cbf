package host

import (
	"io"
	"sync"
)

// An asyncWriter writes to w on a goroutine of its own, through a few
// buffers: whoever writes to it goes on while w works on the bytes before.
// A snapshot uses one between the walk and the compressor, which then run
// on two cores. Its memory is bounded by its buffers; once w fails, writes
// fail with w's error.
type asyncWriter struct {
	full chan []byte   // Buffers to write to w, in order.
	free chan []byte   // Buffers w is done with.
	buf  []byte        // The buffer being filled.
	done chan error    // w's first error (or nil), once full is closed and drained.
	fail chan struct{} // Closed when w has failed.

	mu  sync.Mutex
	err error // w's first error.
}

// newAsyncWriter returns an asyncWriter to w with n buffers of size bytes.
// Close it to flush and stop its goroutine.
func newAsyncWriter(w io.Writer, n, size int) *asyncWriter {
	a := &asyncWriter{
		full: make(chan []byte, n),
		free: make(chan []byte, n),
		done: make(chan error, 1),
		fail: make(chan struct{}),
	}
	for range n - 1 {
		a.free <- make([]byte, 0, size)
	}
	a.buf = make([]byte, 0, size)
	go a.drain(w)
	return a
}

// drain writes each full buffer to w until Close, and after w fails only
// hands the buffers back.
func (a *asyncWriter) drain(w io.Writer) {
	var err error
	for b := range a.full {
		if err == nil {
			if _, err = w.Write(b); err != nil {
				a.mu.Lock()
				a.err = err
				a.mu.Unlock()
				close(a.fail)
			}
		}
		a.free <- b[:0]
	}
	a.done <- err
}

func (a *asyncWriter) failed() error {
	select {
	case <-a.fail:
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.err
	default:
		return nil
	}
}

// Write copies p into the buffers, handing each full one to the
// goroutine.
func (a *asyncWriter) Write(p []byte) (int, error) {
	if err := a.failed(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		k := copy(a.buf[len(a.buf):cap(a.buf)], p)
		a.buf = a.buf[:len(a.buf)+k]
		p = p[k:]
		if len(a.buf) == cap(a.buf) {
			a.full <- a.buf
			a.buf = <-a.free
		}
	}
	return n, nil
}

// Close writes what is buffered, waits for the goroutine to finish and
// returns w's first error.
func (a *asyncWriter) Close() error {
	if len(a.buf) > 0 {
		a.full <- a.buf
		a.buf = nil
	}
	close(a.full)
	return <-a.done
}
