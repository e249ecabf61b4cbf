package workflowstest

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// TurnFunc answers a model request with the items of the model's turn:
// an assistant message (agents.AssistantMessage) for a final answer, or
// calls (Call) for tool calls and handoffs.
type TurnFunc func(req model.Request) []agents.Item

// FuncModel is a model.Model whose answers a Go func gives. Each call
// uses 10 input and 5 output tokens. It counts the calls per agent, by the
// first word of the request's instructions (FirstWord), and is safe for
// concurrent use, as the activities of parallel agents call it at once.
// The zero value counts calls and answers them with an error.
type FuncModel struct {
	// Func answers each request; nil fails every call.
	Func TurnFunc

	mu    sync.Mutex
	calls map[string]int
}

// errNoFunc is what a FuncModel without Func answers.
var errNoFunc = errors.New("workflowstest: the FuncModel has no Func")

// Respond counts the call and answers it with Func.
func (m *FuncModel) Respond(_ context.Context, req model.Request) (*model.Response, error) {
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[FirstWord(req.Instructions)]++
	m.mu.Unlock()
	if m.Func == nil {
		return nil, errNoFunc
	}
	return &model.Response{Output: m.Func(req), Usage: model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}, nil
}

// Calls is how many calls the agent whose instructions start with word
// made ("ops:" for an agent whose instructions are "ops: deploys").
func (m *FuncModel) Calls(word string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[word]
}

// FirstWord is the first word of s: what a FuncModel counts calls by.
func FirstWord(s string) string { w, _, _ := strings.Cut(s, " "); return w }
