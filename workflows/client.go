package workflows

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
)

// ClusterID returns the id of the Temporal cluster c talks to.
func ClusterID(ctx context.Context, c client.Client) (string, error) {
	info, err := c.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("workflows: cluster info: %w", err)
	}
	return info.GetClusterId(), nil
}

// KeepOpen returns a keep-policy for sandbox orphan reaping, for the
// sandboxes of namespace on c's cluster: a sandbox is kept while the
// workflow named by its troupe.workflow label is open, when that cannot
// be told (the server does not answer), when it has no such label (no
// workflow of ours made it), and when its troupe.cluster or
// troupe.namespace label names another cluster or namespace. A sandbox of
// this cluster and namespace whose workflow is closed or unknown is an
// orphan.
func KeepOpen(ctx context.Context, c client.Client, namespace string) func(labels map[string]string) bool {
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	cluster, clusterErr := ClusterID(ctx, c)
	return func(labels map[string]string) bool {
		id := labels["troupe.workflow"]
		if id == "" {
			return true
		}
		if cl := labels[troupe.LabelCluster]; cl != "" && (clusterErr != nil || cl != cluster) {
			return true
		}
		if ns := labels[troupe.LabelNamespace]; ns != "" && ns != namespace {
			return true
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			var nf *serviceerror.NotFound
			return !errors.As(err, &nf)
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
}

// runDetails is a run's current details in the Web UI: its summary and
// the agent at work.
func runDetails(in troupe.RunInput, agent string) string {
	return in.Summary() + "\n\nagent at work: " + agent
}
