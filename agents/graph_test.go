package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

type echoArgs struct {
	Text string `json:"text"`
}

func echo(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }

func TestNewGraphValidation(t *testing.T) {
	tool := agents.MustFunctionTool("echo", "Echoes.", echo)
	tests := []struct {
		name    string
		entry   string
		agents  []*agents.Agent
		wantErr string
	}{
		{"valid", "a", []*agents.Agent{
			{Name: "a", Tools: []agents.Tool{tool, agents.AsTool("b", "ask_b", "")}, Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
			{Name: "b"},
		}, ""},
		{"duplicate agent", "a", []*agents.Agent{{Name: "a"}, {Name: "a"}}, `duplicate agent "a"`},
		{"unknown entry", "x", []*agents.Agent{{Name: "a"}}, `entry agent "x"`},
		{"unknown handoff target", "a", []*agents.Agent{{Name: "a", Handoffs: []agents.Handoff{agents.HandoffTo("ghost")}}}, `handoff to unknown agent "ghost"`},
		{"unknown agent tool", "a", []*agents.Agent{{Name: "a", Tools: []agents.Tool{agents.AsTool("ghost", "g", "")}}}, `runs unknown agent "ghost"`},
		{"tool name clash", "a", []*agents.Agent{{Name: "a", Tools: []agents.Tool{tool, tool}}}, `two tools named "echo"`},
		{"clash with handoff tool", "a", []*agents.Agent{
			{Name: "a", Tools: []agents.Tool{agents.AsTool("b", "transfer_to_b", "")}, Handoffs: []agents.Handoff{agents.HandoffTo("b")}},
			{Name: "b"},
		}, `two tools named "transfer_to_b"`},
		{"invalid agent name", "a b", []*agents.Agent{{Name: "a b"}}, `agent "a b" must match`},
		{"invalid tool name", "a", []*agents.Agent{{Name: "a", Tools: []agents.Tool{agents.AsTool("a", "bad.name", "")}}}, `tool "bad.name" must match`},
		{"nil agent", "a", []*agents.Agent{{Name: "a"}, nil}, "nil agent"},
		{"MCP server without transport", "a", []*agents.Agent{{Name: "a", MCPServers: []*agents.MCPServer{{Name: "s"}}}}, "sets neither Command nor URL"},
		{"MCP server with two transports", "a", []*agents.Agent{{Name: "a", MCPServers: []*agents.MCPServer{{Name: "s", URL: "http://x", Command: []string{"x"}}}}}, "sets both"},
		{"MCP server bad name", "a", []*agents.Agent{{Name: "a", MCPServers: []*agents.MCPServer{{Name: "s s", URL: "http://x"}}}}, `name "s s" must match`},
		{"two MCP servers of one name", "a", []*agents.Agent{{Name: "a", MCPServers: []*agents.MCPServer{{Name: "s", URL: "http://x"}, {Name: "s", URL: "http://y"}}}}, `two MCP servers named "s"`},
		{"exposed with a bad name", "a", []*agents.Agent{{Name: "a", Expose: agents.Expose("bad name", "")}}, `tool "bad name" must match`},
		{"exposure not built", "a", []*agents.Agent{{Name: "a", Expose: &agents.Exposure{Name: "x"}}}, "build its Exposure with agents.Expose"},
		{"manifest path with ..", "a", []*agents.Agent{{Name: "a", Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: sandbox.EntryFile, Path: "../outside", Content: "x"}}}}}}, `agent "a": manifest entry 0 (file "../outside")`},
		{"manifest absolute path", "a", []*agents.Agent{{Name: "a", Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "/etc/x"}}}}}}, `"/etc/x" is absolute`},
		{"manifest unknown kind", "a", []*agents.Agent{{Name: "a", Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Entries: []sandbox.Entry{{Kind: "symlink", Path: "l"}}}}}}, `unknown kind "symlink"`},
		{"manifest env name", "a", []*agents.Agent{{Name: "a", Sandbox: &agents.Sandbox{Manifest: sandbox.Manifest{
			Env: map[string]string{"A=B": "x"}}}}}, `manifest env: invalid name "A=B"`},
		{"workspace tool capability on a plain agent", "a", []*agents.Agent{{Name: "a", Capabilities: []agents.Capability{
			testCapability{name: "shellish", tools: []agents.Tool{agents.MustFunctionTool("run", "Runs.", echo, agents.InSandbox())}}}}}, "capability shellish needs a sandbox agent"},
		{"manifest capability on a plain agent", "a", []*agents.Agent{{Name: "a", Capabilities: []agents.Capability{
			testCapability{name: "files", manifest: sandbox.Manifest{Entries: []sandbox.Entry{{Kind: sandbox.EntryDir, Path: "x"}}}}}}}, "capability files needs a sandbox agent"},
		{"plain capability on a plain agent", "a", []*agents.Agent{
			{Name: "a", Tools: []agents.Tool{tool, agents.AsTool("b", "ask_b", "")}, Handoffs: []agents.Handoff{agents.HandoffTo("b")},
				Capabilities: []agents.Capability{testCapability{name: "trim"}}},
			{Name: "b"},
		}, ""},
		{"two agents exposed as one tool", "a", []*agents.Agent{
			{Name: "a", Expose: agents.Expose("ask", "")}, {Name: "b", Expose: agents.Expose("ask", "")},
		}, `both exposed as "ask"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := agents.NewGraph("g", tc.entry, tc.agents...)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				specs := g.ToolSpecs("a")
				var names []string
				for _, s := range specs {
					names = append(names, s.Name)
				}
				if strings.Join(names, ",") != "echo,ask_b,transfer_to_b" {
					t.Errorf("tool specs = %v", names)
				}
				if g.Tool("a", "transfer_to_b").Kind != agents.ToolHandoff || g.Tool("a", "nope").Kind != agents.ToolUnknown {
					t.Error("Tool() misclassifies")
				}
				return
			}
			if !errors.Is(err, agents.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrInvalidGraph containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFunctionToolCall(t *testing.T) {
	type result struct {
		N int `json:"n"`
	}
	type countArgs struct {
		Text string `json:"text"`
		Pad  *int   `json:"pad,omitempty"`
	}
	tool := agents.MustFunctionTool("count", "Counts.", func(_ context.Context, a countArgs) (result, error) {
		if a.Text == "fail" {
			return result{}, errors.New("boom")
		}
		return result{N: len(a.Text)}, nil
	})
	tests := []struct {
		name, args, want string
		argsErr          bool
		errText          string
	}{
		{"struct result as JSON", `{"text":"abc","pad":null}`, `{"n":3}`, false, ""},
		{"tool error", `{"text":"fail"}`, "", false, "boom"},
		{"unknown field", `{"text":"a","x":1}`, "", true, "invalid arguments"},
		{"wrong type", `{"text":1}`, "", true, "invalid arguments"},
		{"missing field", `{}`, "", true, "invalid arguments"},
		{"missing optional field means null", `{"text":"ab"}`, `{"n":2}`, false, ""},
		{"not JSON", `{"text":`, "", true, "invalid arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Call(context.Background(), tc.args)
			var ae *agents.ToolArgsError
			if errors.As(err, &ae) != tc.argsErr {
				t.Errorf("err = %v, want ToolArgsError=%v", err, tc.argsErr)
			}
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("err = %v, want %q", err, tc.errText)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Call = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewFunctionToolChecksAtConstruction(t *testing.T) {
	if _, err := agents.NewFunctionTool("bad name", "", echo); !errors.Is(err, agents.ErrInvalidName) {
		t.Errorf("bad name: err = %v", err)
	}
	if _, err := agents.NewFunctionTool("s", "", func(context.Context, string) (string, error) { return "", nil }); !errors.Is(err, agents.ErrSchema) {
		t.Errorf("string args: err = %v", err)
	}
	if _, err := agents.NewFunctionTool("m", "", func(context.Context, withMap) (string, error) { return "", nil }); !errors.Is(err, agents.ErrSchema) {
		t.Errorf("map args: err = %v", err)
	}
	var nilFn func(context.Context, echoArgs) (string, error)
	if _, err := agents.NewFunctionTool("n", "", nilFn); err == nil {
		t.Error("nil func accepted")
	}
}

func TestMCPServerOffers(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		want        map[string]bool
	}{
		{"everything", nil, nil, map[string]bool{"echo": true, "add": true}},
		{"allow list", []string{"echo"}, nil, map[string]bool{"echo": true, "add": false}},
		{"deny list", nil, []string{"echo"}, map[string]bool{"echo": false, "add": true}},
		{"deny wins", []string{"echo", "add"}, []string{"echo"}, map[string]bool{"echo": false, "add": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &agents.MCPServer{Name: "s", URL: "http://x", Allow: tc.allow, Deny: tc.deny}
			for tool, want := range tc.want {
				if got := s.Offers(tool); got != want {
					t.Errorf("Offers(%q) = %v, want %v", tool, got, want)
				}
			}
		})
	}
}

func TestExposure(t *testing.T) {
	type request struct {
		Repo string  `json:"repo"`
		Ref  *string `json:"ref,omitempty"`
	}
	typed, err := agents.ExposeAs("review", "Reviews.", func(r request) (agents.ExposedRun, error) {
		run := agents.ExposedRun{Input: "review " + r.Repo, Vars: map[string]string{"repo": r.Repo}}
		if r.Ref != nil {
			run.Vars["ref"] = *r.Ref
		}
		return run, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		e       *agents.Exposure
		args    string
		want    string
		wantErr string
	}{
		{"plain input", agents.Expose("", ""), `{"input":"hello"}`, "hello map[]", ""},
		{"plain input missing", agents.Expose("", ""), `{}`, "", "missing property"},
		{"typed, optional left out", typed, `{"repo":"/r"}`, "review /r map[repo:/r]", ""},
		{"typed, optional set", typed, `{"repo":"/r","ref":"main"}`, "review /r map[ref:main repo:/r]", ""},
		{"typed, unknown field", typed, `{"repo":"/r","evil":1}`, "", "additional properties"},
		{"typed, wrong type", typed, `{"repo":3}`, "", "want string"},
		{"not JSON", typed, `{`, "", "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run, err := tc.e.Run(json.RawMessage(tc.args))
			if tc.wantErr != "" {
				var ae *agents.ToolArgsError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a ToolArgsError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s %v", run.Input, run.Vars); got != tc.want {
				t.Errorf("run = %q, want %q", got, tc.want)
			}
		})
	}
	if schema := string(typed.InputSchema()); !strings.Contains(schema, `"additionalProperties":false`) {
		t.Errorf("input schema is not strict: %s", schema)
	}
	g := agents.MustGraph("g", "a", &agents.Agent{Name: "a", Expose: agents.Expose("", "")}, &agents.Agent{Name: "b"}, &agents.Agent{Name: "c", Expose: typed})
	var names []string
	for _, a := range g.Exposed() {
		names = append(names, g.ExposedName(a))
	}
	if strings.Join(names, ",") != "g_a,review" {
		t.Errorf("exposed = %v", names)
	}
}

// testCapability is a capability with the given tools and manifest.
type testCapability struct {
	name     string
	tools    []agents.Tool
	manifest sandbox.Manifest
}

func (c testCapability) Name() string               { return c.name }
func (c testCapability) Instructions() string       { return "" }
func (c testCapability) Tools() []agents.Tool       { return c.tools }
func (c testCapability) Manifest() sandbox.Manifest { return c.manifest }

func TestApprovalPolicyChecks(t *testing.T) {
	tool := agents.MustFunctionTool("deploy", "Deploys.", func(context.Context, struct{}) (string, error) { return "", nil })
	for _, tc := range []struct {
		name      string
		agent     *agents.Agent
		wantGraph string // an error NewGraph gives
		wantCheck string // an error CheckApprovals gives
	}{
		{"a known tool", &agents.Agent{Name: "a", Tools: []agents.Tool{tool}, Approvals: []agents.Approval{agents.Always("deploy")}}, "", ""},
		{"no tool named", &agents.Agent{Name: "a", Approvals: []agents.Approval{{}}}, "names no tool", ""},
		{"twice", &agents.Agent{Name: "a", Tools: []agents.Tool{tool}, Approvals: []agents.Approval{agents.Always("deploy"), agents.Never("deploy")}}, "two approval policies", ""},
		{"negative timeout", &agents.Agent{Name: "a", Tools: []agents.Tool{tool}, Approvals: []agents.Approval{{Tool: "deploy", Timeout: -1}}}, "negative timeout", ""},
		{"unknown on a plain agent", &agents.Agent{Name: "a", Approvals: []agents.Approval{agents.Always("deplyo")}}, "unknown tool", ""},
		{"unknown on a sandbox agent, until its capabilities are there", &agents.Agent{Name: "a", Sandbox: &agents.Sandbox{}, Approvals: []agents.Approval{agents.Always("exec_command")}}, "", "unknown tool"},
		{"an MCP tool", &agents.Agent{Name: "a", MCPServers: []*agents.MCPServer{{Name: "s", URL: "http://x"}}, Approvals: []agents.Approval{agents.Always("s_wipe")}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := agents.NewGraph("g", "a", tc.agent)
			if tc.wantGraph != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantGraph) {
					t.Fatalf("NewGraph: %v, want %q", err, tc.wantGraph)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = g.CheckApprovals()
			if (tc.wantCheck == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantCheck) {
				t.Errorf("CheckApprovals: %v, want %q", err, tc.wantCheck)
			}
		})
	}
}
