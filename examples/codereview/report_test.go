package codereview

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

func TestParseFindings(t *testing.T) {
	tests := []struct {
		name, doc string
		want      int
		wantErr   string
	}{
		{"valid", `[{"file":"a.go","line":3,"severity":"high","message":"m"},{"file":"","line":0,"severity":"info","message":"n"}]`, 2, ""},
		{"empty", `[]`, 0, ""},
		{"not JSON", `nope`, 0, "JSON array"},
		{"an object", `{"file":"a.go"}`, 0, "JSON array"},
		{"null", `null`, 0, "JSON array"},
		{"unknown field", `[{"file":"a.go","line":1,"severity":"low","message":"m","extra":1}]`, 0, "unknown field"},
		{"bad severity", `[{"file":"a.go","line":1,"severity":"critical","message":"m"}]`, 0, "severity \"critical\""},
		{"negative line", `[{"file":"a.go","line":-1,"severity":"low","message":"m"}]`, 0, "negative"},
		{"trailing text", `[] []`, 0, "after the JSON array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := ParseFindings(tc.doc)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidFindings) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want ErrInvalidFindings mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(fs) != tc.want || fs == nil {
				t.Errorf("ParseFindings = %v (%d), %v; want %d findings", fs, len(fs), err, tc.want)
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "reports", "nested")
	fs := []Finding{
		{File: "auth/login.go", Line: 4, Severity: SeverityHigh, Message: `password := "hunter2" <here>`},
		{File: "auth/login.go", Line: 1, Severity: SeverityMedium, Message: "no test"},
		{File: "auth/login.go", Line: 3, Severity: SeverityLow, Message: "no doc"},
		{File: "", Line: 0, Severity: SeverityLow, Message: "general"},
	}
	rep, err := WriteReport(out, "# Review", fs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ReportPath != filepath.Join(out, ReportFile) || rep.FindingsPath != filepath.Join(out, FindingsFile) {
		t.Errorf("paths = %+v", rep)
	}
	if rep.Counts != (Counts{High: 1, Medium: 1, Low: 2}) {
		t.Errorf("counts = %+v", rep.Counts)
	}
	md, err := os.ReadFile(rep.ReportPath)
	if err != nil || string(md) != "# Review\n" {
		t.Errorf("report = %q, %v", md, err)
	}
	data, err := os.ReadFile(rep.FindingsPath)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseFindings(string(data))
	if err != nil || len(back) != len(fs) || back[0] != fs[0] {
		t.Errorf("findings file %s: %v", data, err)
	}
	if !strings.Contains(string(data), "<here>") {
		t.Errorf("findings file escapes HTML: %s", data)
	}
}

// TestWriteReportConfined plants symlinks in the output directory that
// lead outside it: write_report refuses them and writes nothing outside.
func TestWriteReportConfined(t *testing.T) {
	for _, name := range []string{ReportFile, FindingsFile} {
		t.Run(name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(out, name)); err != nil {
				t.Fatal(err)
			}
			_, err := WriteReport(out, "# pwned", []Finding{})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("err = %v, want a refusal naming %s", err, name)
			}
			if data, _ := os.ReadFile(outside); string(data) != "keep" {
				t.Errorf("the file outside became %q", data)
			}
		})
	}
	t.Run("relative link out", func(t *testing.T) {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../escaped.md", filepath.Join(out, ReportFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteReport(out, "# pwned", nil); err == nil {
			t.Error("a relative symlink out of the directory was followed")
		}
		if _, err := os.Stat(filepath.Join(parent, "escaped.md")); !os.IsNotExist(err) {
			t.Errorf("a file was created outside: %v", err)
		}
	})
}

func TestWriteReportTool(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	ctx := agents.WithRunContext(context.Background(), agents.RunContext{Vars: map[string]string{VarOut: out}})
	args, _ := json.Marshal(ReportArgs{Markdown: "# R", FindingsJSON: `[{"file":"a.go","line":2,"severity":"high","message":"m"}]`})
	res, err := WriteReportTool.Call(ctx, string(args))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal([]byte(res), &rep); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	if rep.ReportPath != filepath.Join(out, ReportFile) || rep.Counts.High != 1 {
		t.Errorf("report = %+v", rep)
	}
	args, _ = json.Marshal(ReportArgs{Markdown: "# R", FindingsJSON: `[{"file":"a.go"}]`})
	if _, err := WriteReportTool.Call(ctx, string(args)); !errors.Is(err, ErrInvalidFindings) {
		t.Errorf("invalid findings: err = %v", err)
	}
	if !WriteReportTool.RunsAsActivity() {
		t.Error("write_report writes files: it should run as a regular activity")
	}
}

func TestGraphAndScenario(t *testing.T) {
	g := Graph()
	if g.Name() != "codereview" {
		t.Errorf("graph name = %s", g.Name())
	}
	for _, name := range []string{"coordinator", "security_reviewer", "tests_reviewer", "api_design_reviewer"} {
		a, err := g.Agent(name)
		if err != nil {
			t.Fatal(err)
		}
		if (a.Sandbox != nil) != (name != "coordinator") {
			t.Errorf("%s: sandbox %v", name, a.Sandbox)
		}
	}
	if _, err := scripted.ParseScenario(Scenario); err != nil {
		t.Fatal(err)
	}
}

// TestExposure checks what an MCP client may ask of the codereview tool:
// the repository becomes the run's variable and the report goes to the
// request's own directory; URLs that would clone with the host's identity
// or credentials are refused.
func TestExposure(t *testing.T) {
	coordinator, err := Graph().Agent("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    string
		wantErr string
	}{
		{`{"repo":"/src/app"}`, ""},
		{`{"repo":"/src/app","ref":"main","request":null}`, ""},
		{`{"repo":"https://example.com/app.git"}`, ""},
		{`{"repo":"git@github.com:org/app.git"}`, "must be an absolute path"},
		{`{"repo":"ssh://host/app.git"}`, "must be an absolute path"},
		{`{"repo":"file:///etc"}`, "must be an absolute path"},
		{`{"repo":"https://user:secret@example.com/app.git"}`, "must be an absolute path"},
		{`{"repo":"relative/path"}`, "must be an absolute path"},
		{`{"repo":"/src/app","out":"/etc"}`, "additional properties"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			run, err := coordinator.Expose.Run(json.RawMessage(tc.args))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var req ReviewRequest
			if err := json.Unmarshal([]byte(tc.args), &req); err != nil {
				t.Fatal(err)
			}
			cache, _ := os.UserCacheDir()
			if run.Vars[VarRepo] != req.Repo || run.Vars[VarOut] != ReportDir(req) || cache == "" || !strings.HasPrefix(run.Vars[VarOut], cache) {
				t.Errorf("vars = %v", run.Vars)
			}
		})
	}
}
