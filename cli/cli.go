package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/agents"
)

// Graph is a graph the CLI serves, with its offline scenario for the
// scripted model (YAML or JSON; may be empty when the graph has none).
type Graph struct {
	Graph *agents.Graph
	// Scenario is the graph's offline scenario (runtime/model/scripted),
	// played when OPENAI_API_KEY is unset.
	Scenario []byte
	// ScenarioFile says where Scenario is kept (for example
	// "examples/dealdesk/scenario.yaml"), for the error of a message it
	// has no answer for (troupe.ScenarioNoMatch), which tells the user to
	// add a rule there. Default: "the offline scenario of graph NAME".
	ScenarioFile string
	// Flags are the graph's own `troupe run` flags; each value set becomes
	// the run variable of the same name.
	Flags []Flag
	// DefaultInput is the input of `troupe run` when none is given; a
	// graph without one needs it.
	DefaultInput string
}

// Flag is a `troupe run` flag of a graph.
type Flag struct {
	// Name is the flag and run-variable name, e.g. "repo".
	Name string
	// Usage is the flag's help text.
	Usage string
	// Default is the value when the flag is not given.
	Default string
	// HostPath marks a host path the graph's sandboxes may copy from: its
	// absolute form joins the sandbox policy's allowed roots (for the
	// worker this command runs).
	HostPath bool
	// GitRepo marks a git repository: when the run goes to the workers
	// of a task queue (not to a worker of this process), a local path is
	// packed into their blob store and the run variable names it there
	// ("blob:KEY", see runtime/sandbox/gitbundle), so workers on hosts
	// that cannot see this disk read it too. A URL is passed as it is.
	GitRepo bool
}

// hasGitRepo reports whether a flag of g names a git repository.
func hasGitRepo(g Graph) bool {
	for _, f := range g.Flags {
		if f.GitRepo {
			return true
		}
	}
	return false
}

// Main runs the troupe command line over graphs and exits.
func Main(graphs ...Graph) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, Command(graphs, os.Stdout, os.Stderr), os.Args[1:])
	stop()
	os.Exit(code)
}

// ExitCode is the troupe command's exit status for the error a command
// returned: 130 for an *Interrupted (the run goes on), 1 otherwise, 0 for
// nil.
func ExitCode(err error) int {
	var in *Interrupted
	switch {
	case err == nil:
		return 0
	case errors.As(err, &in):
		return 130
	}
	return 1
}

// Command returns the root command over graphs, writing output to stdout
// and progress and diagnostics to stderr.
func Command(graphs []Graph, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "troupe",
		Short:         "Run multi-agent LLM systems durably on Temporal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(devCommand(graphs), workerCommand(graphs), runCommand(graphs), runsCommand(graphs), sessionsCommand(graphs), chatCommand(graphs), mcpCommand(graphs), modelCommand(), sandboxCommand(), codecServerCommand())
	markRun(root)
	return root
}

func findGraph(graphs []Graph, name string) (Graph, error) {
	var names []string
	for _, g := range graphs {
		if g.Graph.Name() == name {
			return g, nil
		}
		names = append(names, g.Graph.Name())
	}
	if name == "" {
		return Graph{}, usage(fmt.Errorf("name a graph with --graph: this troupe serves %s", strings.Join(names, ", ")))
	}
	return Graph{}, usage(fmt.Errorf("no graph %q; this troupe serves %s", name, strings.Join(names, ", ")))
}
