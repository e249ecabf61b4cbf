package workflows

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
)

// callSummary, which decodes arguments only when they may name cmd, says
// what it said when it decoded them all.
func TestCallSummary(t *testing.T) {
	decodeAll := func(c agents.Item) string {
		var args struct {
			Cmd string `json:"cmd"`
		}
		if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Cmd != "" {
			return c.Name + ": " + troupe.Preview(strings.Join(strings.Fields(args.Cmd), " "), 200)
		}
		return c.Name
	}
	cases := []string{"", "{}", `{"turn":"1"}`, `{"cmd":"go test ./..."}`, `{"CMD":"ls"}`, `{"cMd":" a  b "}`, `{"\u0063md":"ls"}`,
		`{"cmd":5}`, `{"cmd":""}`, `{"command":"ls"}`, `{"x":"cmd"}`, `not json cmd`, `{"cmd":"ls"`, `{"cm\u0064":"x"}`}
	r := rand.New(rand.NewPCG(5, 6))
	pieces := []string{`{`, `}`, `"`, `:`, `,`, `cmd`, `CMD`, `Cmd`, `c`, `m`, `d`, `\`, `u0063`, ` `, `"x"`, `1`}
	for range 5000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		cases = append(cases, sb.String(), `{"cmd":"`+sb.String()+`"}`)
	}
	for _, args := range cases {
		c := agents.Item{Name: "exec_command", Arguments: args}
		if got, want := callSummary(c), decodeAll(c); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
}

// The Web UI's strings, built without fmt, are as fmt built them.
func TestSummaries(t *testing.T) {
	in := ModelInput{Agent: "looper", Run: agents.RunContext{Turn: 12}}
	if got := modelSummary(in); got != "model turn 12 of looper" {
		t.Errorf("modelSummary = %q", got)
	}
	tc := &turnCalls{}
	if got := tc.outputKey(agents.RunContext{WorkflowID: "run-1/0-a", Turn: 3}, agents.Item{CallID: "call_7"}); got != "outputs/run-1/0-a/3-call_7" {
		t.Errorf("outputKey = %q", got)
	}
}
