package troupe_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportDirection holds the arrows of shared/DESIGN.md: the vocabulary
// and the client carry no worker code, so a program that only starts and
// follows runs links neither the workflows nor the worker nor the server;
// the plain-Go layers (agents, runtime) link no Temporal and no go-git.
// It reads each package's whole dependency graph with `go list -deps`.
func TestImportDirection(t *testing.T) {
	const module = "github.com/troupe-dev/troupe"
	worker := []string{
		module + "/workflows", // and every room under it
		module + "/runtime/devserver",
		module + "/runtime/sandbox/", // the host side and the backends; the contract is runtime/sandbox itself
		module + "/capabilities",
		module + "/memory",
		module + "/mcp",
		module + "/cli",
		"go.temporal.io/sdk/worker",
		"go.temporal.io/sdk/workflow",
		"go.temporal.io/sdk/activity",
		"go.temporal.io/server",
		"github.com/go-git/",
	}
	tests := []struct {
		pkg    string
		banned []string
	}{
		{module, worker},
		{module + "/client", worker},
		{module + "/agents", []string{"go.temporal.io/", "github.com/go-git/", module + "/runtime/sandbox/", module + "/workflows"}},
		{module + "/runtime", []string{"go.temporal.io/", "github.com/go-git/", module + "/runtime/blob", module + "/runtime/sandbox/", module + "/workflows"}},
		{module + "/runtime/sandbox", []string{"go.temporal.io/", "github.com/go-git/", module + "/runtime/sandbox/"}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(strings.TrimPrefix(tt.pkg, module), "/"), func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", tt.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", tt.pkg, err)
			}
			deps := strings.Fields(string(out))
			var bad []string
			for _, d := range deps {
				if d == tt.pkg {
					continue
				}
				for _, b := range tt.banned {
					// "p/" bans p's subpackages; "p" bans p and them.
					if strings.HasSuffix(b, "/") && strings.HasPrefix(d, b) || d == b || strings.HasPrefix(d, b+"/") {
						bad = append(bad, d)
						break
					}
				}
			}
			if len(bad) > 0 {
				slices.Sort(bad)
				t.Errorf("%s links %d packages it must not (of %d): %s", tt.pkg, len(bad), len(deps), strings.Join(bad[:min(len(bad), 12)], " "))
			}
		})
	}
}
