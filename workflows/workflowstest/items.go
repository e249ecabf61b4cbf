package workflowstest

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
)

// Call is a call of tool name (a handoff's transfer_to_NAME too) with id
// and the arguments args, as a model's turn holds it.
func Call(id, name, args string) agents.Item { return agents.FunctionCall(id, name, args) }

// Shell is a call of the shell capability's exec_command tool that runs
// cmd in the agent's sandbox.
func Shell(id, cmd string) agents.Item {
	args, _ := json.Marshal(map[string]any{"cmd": cmd, "workdir": nil, "yield_time_ms": nil, "max_output_tokens": nil})
	return Call(id, "exec_command", string(args))
}

// LastItem is the last item of req's input: the user's message on a
// turn's first call, a call's output after tool calls.
func LastItem(req model.Request) agents.Item { return req.Input[len(req.Input)-1] }

// LastUser is the last thing the user said in req.
func LastUser(req model.Request) string {
	var user string
	for _, it := range req.Input {
		if it.Type == agents.ItemMessage && it.Role == "user" {
			user = it.Content
		}
	}
	return user
}

// OutputsOf are the function outputs the model was sent in req, by call
// id.
func OutputsOf(req model.Request) map[string]string {
	out := map[string]string{}
	for _, it := range req.Input {
		if it.Type == agents.ItemFunctionCallOutput {
			out[it.CallID] = it.Output
		}
	}
	return out
}

// Strings is a list of strings that is safe for concurrent use: what a
// test's tools ran, say, which calls in parallel activities add to. The
// zero value is empty.
type Strings struct {
	mu   sync.Mutex
	list []string
}

// Add appends v.
func (s *Strings) Add(v string) { s.mu.Lock(); s.list = append(s.list, v); s.mu.Unlock() }

// List is a copy of the strings added, in order.
func (s *Strings) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}
