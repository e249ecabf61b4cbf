package memory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/agents"
)

// Outcomes of a rollout line: how the run or turn ended.
const (
	OutcomeAnswered    = "answered"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
	OutcomeRolledBack  = "rolled_back"
)

// Line is one run or session turn of a rollout, as its JSONL file holds it.
type Line struct {
	// Seq numbers the lines of a rollout from 1 (a session's turn number,
	// 1 for a run): an append of a Seq the file holds adds nothing.
	Seq int `json:"seq"`
	// Workflow is the workflow id of the run or turn.
	Workflow string `json:"workflow"`
	// Agent is the agent that ended the run or turn.
	Agent string `json:"agent,omitempty"`
	// Input is the user's message.
	Input string `json:"input"`
	// Items are what the run or turn generated: messages, tool calls and
	// their outputs, without system or developer messages or reasoning
	// ([Generated]).
	Items []agents.Item `json:"items,omitempty"`
	// Output is the final output, when there is one: a JSON document, or
	// a JSON string of text.
	Output json.RawMessage `json:"output,omitempty"`
	// Outcome is how it ended: one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Error says why it failed, for OutcomeFailed.
	Error string `json:"error,omitempty"`
	// Ended is when it ended.
	Ended time.Time `json:"ended"`
}

// ErrBadRollout reports a rollout file or line that does not parse.
var ErrBadRollout = errors.New("memory: bad rollout")

// Generated returns the items of a run or turn that a rollout keeps: every
// item but system and developer messages and reasoning.
func Generated(items []agents.Item) []agents.Item {
	var out []agents.Item
	for _, it := range items {
		if it.Type == agents.ItemReasoning {
			continue
		}
		if it.Type == agents.ItemMessage && (it.Role == agents.RoleSystem || it.Role == agents.RoleDeveloper) {
			continue
		}
		it.EncryptedContent, it.Images = "", nil
		out = append(out, it)
	}
	return out
}

// ParseLines parses a rollout's JSONL file.
func ParseLines(data []byte) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadRollout, n, err)
		}
		if l.Seq < 1 {
			return nil, fmt.Errorf("%w: line %d: seq %d", ErrBadRollout, n, l.Seq)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRollout, err)
	}
	return out, nil
}

// AppendLine returns a rollout file (data) with l appended, and how many
// lines it then holds. When data already holds a line of l's Seq or a later
// one (an append retried after a crash), it returns data as it is and
// added false.
func AppendLine(data []byte, l Line) (out []byte, lines int, added bool, err error) {
	if l.Seq < 1 {
		return nil, 0, false, fmt.Errorf("%w: seq %d", ErrBadRollout, l.Seq)
	}
	have, err := ParseLines(data)
	if err != nil {
		return nil, 0, false, err
	}
	for _, h := range have {
		if h.Seq >= l.Seq {
			return data, len(have), false, nil
		}
	}
	enc, err := json.Marshal(l)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: %v", ErrBadRollout, err)
	}
	out = append(append([]byte(nil), data...), enc...)
	out = append(out, '\n')
	return out, len(have) + 1, true, nil
}

// Render writes a rollout as the text phase 1 reads: each line's input,
// the items it generated, its output and how it ended.
func Render(lines []Line) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## Turn %d (%s", l.Seq, l.Outcome)
		if l.Agent != "" {
			fmt.Fprintf(&b, ", agent %s", l.Agent)
		}
		b.WriteString(")\n")
		fmt.Fprintf(&b, "[user] %s\n", l.Input)
		for _, it := range l.Items {
			switch it.Type {
			case agents.ItemMessage:
				if it.Role == agents.RoleUser && it.Content == l.Input {
					continue
				}
				fmt.Fprintf(&b, "[%s] %s\n", it.Role, it.Content)
			case agents.ItemFunctionCall:
				fmt.Fprintf(&b, "[tool call %s] %s\n", it.Name, it.Arguments)
			case agents.ItemFunctionCallOutput:
				out := it.Output
				if out == "" && it.OutputRef != "" {
					out = "(output stored apart: " + it.OutputRef + ")"
				}
				fmt.Fprintf(&b, "[tool output] %s\n", out)
			}
		}
		if len(l.Output) > 0 {
			var s string
			if json.Unmarshal(l.Output, &s) == nil {
				fmt.Fprintf(&b, "[final output] %s\n", s)
			} else {
				fmt.Fprintf(&b, "[final output] %s\n", l.Output)
			}
		}
		if l.Error != "" {
			fmt.Fprintf(&b, "[error] %s\n", l.Error)
		}
	}
	return b.String()
}

// Bound returns text cut to at most max bytes (plus a marker), keeping its
// head (a third of max) and its tail (the rest), where the request and the
// outcome of a conversation are; the marker says how much was left out.
// Cuts fall on UTF-8 boundaries.
func Bound(text string, max int) string {
	if max <= 0 || len(text) <= max {
		return text
	}
	head := max / 3
	for head > 0 && !utf8.RuneStart(text[head]) {
		head--
	}
	tail := len(text) - (max - head)
	for tail < len(text) && !utf8.RuneStart(text[tail]) {
		tail++
	}
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", text[:head], tail-head, text[tail:])
}
