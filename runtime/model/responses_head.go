// This file keeps the part of a Responses request that does not grow with
// the conversation (model, instructions, tools, output schema, settings),
// encoded: an agent's turns send the same one, and building openai-go's
// params (each tool's schema decoded) and encoding them cost more than
// comparing a request with the last ones.

package model

import (
	"bytes"
	"reflect"
	"sync"

	"github.com/troupe-dev/troupe/agents"
)

// maxHeads bounds the encoded heads a model keeps: one per agent (and
// instructions) that calls it often enough to matter.
const maxHeads = 64

// heads are the encoded heads of recent requests, the most recent first.
type heads struct {
	mu      sync.Mutex
	entries []head
}

// head is a request with no input, and the JSON object of its params.
type head struct {
	req  Request
	json []byte
}

// encoded returns the JSON object of the params of req (its input aside),
// as encode makes it: from an earlier request equal to req, or encoded
// now. The bytes returned are not to be changed.
func (h *heads) encoded(req Request, encode func(Request) ([]byte, error)) ([]byte, error) {
	req.Input = nil
	h.mu.Lock()
	for i, e := range h.entries {
		if sameHead(e.req, req) {
			copy(h.entries[1:i+1], h.entries[:i])
			h.entries[0] = e
			h.mu.Unlock()
			return e.json, nil
		}
	}
	h.mu.Unlock()
	data, err := encode(req)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if len(h.entries) < maxHeads {
		h.entries = append(h.entries, head{})
	}
	copy(h.entries[1:], h.entries)
	// The caller keeps req's slices and pointers: the entry holds copies.
	h.entries[0] = head{req: cloneHead(req), json: data}
	h.mu.Unlock()
	return data, nil
}

// sameHead reports whether two requests without input are the same: every
// field equal, deeply (a nil and an empty list differ, which only costs an
// encoding).
func sameHead(a, b Request) bool {
	return a.Model == b.Model && len(a.Instructions) == len(b.Instructions) && len(a.Tools) == len(b.Tools) &&
		reflect.DeepEqual(a, b)
}

// cloneHead copies what a request without input refers to.
func cloneHead(r Request) Request {
	if r.Tools != nil {
		tools := make([]agents.ToolSpec, len(r.Tools))
		for i, t := range r.Tools {
			t.Parameters = bytes.Clone(t.Parameters)
			tools[i] = t
		}
		r.Tools = tools
	}
	if r.Output != nil {
		o := *r.Output
		o.Schema = bytes.Clone(o.Schema)
		r.Output = &o
	}
	s := &r.Settings
	s.Temperature, s.TopP, s.MaxTokens, s.ParallelToolCalls = clonePtr(s.Temperature), clonePtr(s.TopP), clonePtr(s.MaxTokens), clonePtr(s.ParallelToolCalls)
	return r
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
