package graphs_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/cli"
	"github.com/troupe-dev/troupe/cmd/troupe/graphs"
	"github.com/troupe-dev/troupe/examples/codereview"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// TestServed checks what the troupe command serves: both examples, each
// with an offline scenario the scripted model accepts, and the
// code-review flags as `troupe run` offers them.
func TestServed(t *testing.T) {
	gs := graphs.Served()
	var names []string
	for _, g := range gs {
		names = append(names, g.Graph.Name())
		if _, err := scripted.ParseScenario(g.Scenario); err != nil {
			t.Errorf("graph %s: its scenario: %v", g.Graph.Name(), err)
		}
	}
	if strings.Join(names, ",") != "dealdesk,codereview" {
		t.Errorf("graphs %v, want dealdesk and codereview", names)
	}

	var stdout, stderr bytes.Buffer
	cmd := cli.Command(gs, &stdout, &stderr)
	cmd.SetArgs([]string{"run", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("troupe run --help: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{codereview.VarRepo, codereview.VarRef, codereview.VarOut} {
		if !strings.Contains(stdout.String(), "--"+name+" ") {
			t.Errorf("troupe run offers no --%s:\n%s", name, stdout.String())
		}
	}
	for _, g := range gs {
		for _, f := range g.Flags {
			if f.HostPath != (f.Name == codereview.VarRepo) {
				t.Errorf("flag --%s of %s: HostPath %v; only --repo names a host path", f.Name, g.Graph.Name(), f.HostPath)
			}
		}
	}
}
