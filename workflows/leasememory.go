package workflows

// The memory of agents in their workspaces, as the sandbox lease room's
// activities ask for it (lease.Memory), until package memory takes it
// whole: Activities' own, in memory_workspace.go.

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// leaseMemory is lease.Memory over memory_workspace.go.
type leaseMemory struct{ a *Activities }

func (m leaseMemory) Materialise(ctx context.Context, s sandbox.Session, agent *agents.Agent, rc agents.RunContext) error {
	return m.a.materialiseMemory(ctx, s, agent, memoryScopeOf(agent, rc))
}

func (m leaseMemory) WriteBack(ctx context.Context, s sandbox.Session) (written, conflicts []string, err error) {
	return m.a.writeBackMemory(ctx, s)
}

func (m leaseMemory) Forget(ctx context.Context, sandboxID string) { m.a.forgetMemory(ctx, sandboxID) }

// sandboxErr classifies an error of a workspace's session as the lease
// room does: a sandbox gone, a path escape or a source not allowed is not
// retried.
func sandboxErr(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrGone):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandboxGone, err)
	case errors.Is(err, sandbox.ErrPathEscape), errors.Is(err, sandbox.ErrSourceNotAllowed):
		return temporal.NewNonRetryableApplicationError(err.Error(), troupe.ErrSandbox, err)
	}
	return err
}
