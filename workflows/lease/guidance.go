package lease

// A workspace's guidance (AGENTS.md at its root) reaches the model from
// the agent's first call. A fresh workspace is made only when a sandbox
// tool first needs it, often after the first model call; so, before that
// call, the agent workflow asks a local activity for the guidance the
// manifest would put there (host.ManifestFile: inline content, a host
// file or directory, a local git tree; not a git_repo URL, which the
// create activity reads once it cloned it), read on the host without
// making anything. Its key goes into the lease (SandboxLease.Guidance), as the
// create activity's reading of the real workspace does later; the lease
// remembers it was asked (GuidanceRead), so it is asked once per lease.
// A workspace restored from a snapshot already has its guidance in the
// lease.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// WorkspaceGuidanceActivityName reads the guidance of a workspace not yet
// made, from its manifest.
const WorkspaceGuidanceActivityName = "troupe.WorkspaceGuidance"

// versionManifestGuidance: a sandbox agent whose workspace is not yet
// made reads its guidance from the manifest before its first model call
// (a local activity). The marker is written only for such an agent.
const versionManifestGuidance = "troupe.manifest-guidance"

// WorkspaceGuidanceInput asks for the guidance of the workspace that the
// agent's manifest would make for the run.
type WorkspaceGuidanceInput struct {
	Graph      string            `json:"graph"`
	Agent      string            `json:"agent"`
	WorkflowID string            `json:"workflow_id"`
	Run        agents.RunContext `json:"run"`
	// Backend, when set, is the backend the sandbox will be made on, over
	// the agent's own (a session that switched backend): its policy
	// bounds the host sources read.
	Backend string `json:"backend,omitempty"`
}

// WorkspaceGuidance returns the blob key of the guidance (AGENTS.md,
// bounded as capabilities.ReadGuidance bounds it) that a workspace made
// from the agent's manifest would hold, or "" when it would hold none or
// it cannot be told without making the workspace (a backend without a
// PolicyHolder, a manifest the backend would refuse: its create reports
// that). It writes nothing but the key.
func (a *Activities) WorkspaceGuidance(ctx context.Context, in WorkspaceGuidanceInput) (string, error) {
	_, agent, err := a.Agent(in.Graph, in.Agent)
	if err != nil || agent.Sandbox == nil {
		return "", err
	}
	c, err := a.client(cmp.Or(in.Backend, agent.Sandbox.Backend))
	if err != nil {
		return "", nil // This worker makes no such sandbox: the one that does reads it.
	}
	ph, ok := c.(sandbox.PolicyHolder)
	if !ok {
		return "", nil
	}
	m, err := Manifest(ctx, agent, in.Run)
	if err != nil {
		a.logGuidance(ctx, in, err)
		return "", nil
	}
	// A remote git_repo is not cloned for this: the create activity reads
	// its AGENTS.md once it made the workspace.
	data, err := host.ManifestFile(ctx, m, ph.Policy(), capabilities.AgentsFile, sandbox.MaxReadBytes, host.LocalSourcesOnly())
	var text string
	switch {
	case err == nil:
		text = capabilities.BoundGuidance(string(data))
	case errors.Is(err, sandbox.ErrTooLarge):
		text = capabilities.TooLargeGuidance()
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, sandbox.ErrNotRegular), errors.Is(err, host.ErrRemoteSource):
		return "", nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	default:
		a.logGuidance(ctx, in, err)
		return "", nil
	}
	return a.storeGuidance(ctx, text, in.WorkflowID)
}

func (a *Activities) logGuidance(ctx context.Context, in WorkspaceGuidanceInput, err error) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("the workspace's AGENTS.md cannot be read from the manifest; the model sees it once the sandbox is made",
			"agent", in.Agent, "error", err)
	}
}

// storeGuidance stores a workspace's guidance under the agent workflow's
// outputs and the text's hash, and returns the key.
func (a *Activities) storeGuidance(ctx context.Context, text, workflowID string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	key := "outputs/" + workflowID + "/guidance-" + hex.EncodeToString(sum[:8]) + ".md"
	if err := a.Store.Put(ctx, key, []byte(text)); err != nil {
		return "", err
	}
	return key, nil
}

// ReadGuidance asks, once per lease, for the guidance of a workspace not
// yet made, so the model sees it from its first call (Guidance). A failed
// read leaves the guidance to the workspace's create. A nil Life reads
// none.
func (s *Life) ReadGuidance(ctx workflow.Context) {
	if s == nil || s.lease.State != runtime.LeaseNew || s.lease.Snapshot != "" || s.lease.GuidanceRead {
		return
	}
	if workflow.GetVersion(ctx, versionManifestGuidance, workflow.DefaultVersion, 1) != 1 {
		return
	}
	s.lease.GuidanceRead = true
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		// It reads host files only (no clone of a git_repo URL), and it
		// only saves the model a turn: it is given a minute, once.
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             "read " + capabilities.AgentsFile + " of " + s.agent + "'s workspace from its manifest",
	})
	in := WorkspaceGuidanceInput{Graph: s.graph, Agent: s.agent, WorkflowID: s.wfID, Run: s.run, Backend: s.backend}
	var key string
	if err := workflow.ExecuteLocalActivity(lctx, WorkspaceGuidanceActivityName, in).Get(ctx, &key); err == nil {
		s.lease.Guidance = key
	}
}
