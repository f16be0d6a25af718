package decide

import (
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The rules in this file shape the Job a decision starts and what its end means; the engine
// applies them and decides nothing of its own (docs/architecture.md, "Decide").

// Paused is Cluster API's pause rule: an object is paused when it carries the
// cluster.x-k8s.io/paused annotation or its Cluster's spec.paused is true (clusterPaused nil:
// no Cluster, or one that does not say). The engine applies it to the cached object when it
// gathers, and to live reads just before it creates a Job.
func Paused(annotations map[string]string, clusterPaused *bool) bool {
	_, annotated := annotations[infrav1.PausedAnnotation]
	return annotated || clusterPaused != nil && *clusterPaused
}

// ClusterWait is the dependency wait of a live object without its Cluster (no
// cluster.x-k8s.io/cluster-name label, or a Cluster the cache does not have): nothing is
// assembled or started until it exists. nil when the Cluster is there.
func ClusterWait(name string, found bool) *Wait {
	if name != "" && found {
		return nil
	}
	return &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterReason,
		Message: "waiting for the owning Cluster: set the cluster.x-k8s.io/cluster-name label to an existing Cluster", RequeueAfter: time.Minute}
}

// BelongsToDestroy reports a Job of op that belongs to the object's destroy: the Destroy
// itself, or the Plan that makes its destroy plan (NeedsDestroyPlan). Both run on the durable
// inputs of the last apply, wait for no contract input (the owners may be going away), and
// write no durable inputs.
func BelongsToDestroy(d Decision, op infrav1.Operation) bool {
	return op == infrav1.OperationDestroy || MakesDestroyPlan(d, op)
}

// MakesDestroyPlan reports a Job of op that makes a destroy plan (terraform plan -destroy).
func MakesDestroyPlan(d Decision, op infrav1.Operation) bool {
	return op == infrav1.OperationPlan && d.DestroyPlan
}

// UsesDurableInputs reports a Job of op that runs on the durable inputs of the last apply
// rather than freshly assembled ones: a destroy (and its destroy plan), a restore, a refresh
// (it records reality against what was applied) and a background check. Fresh inputs are
// assembled for them only when there are no durable ones.
func UsesDurableInputs(d Decision, op infrav1.Operation) bool {
	return BelongsToDestroy(d, op) || op == infrav1.OperationRestore || op == infrav1.OperationRefresh || op.Background()
}

// RefreshOnly reports a Job of op that may change the state but never the world: a
// refresh-only plan the decision asked for, or a drift check of an object whose drift mode is
// Accept (its check records reality).
func RefreshOnly(ev Evidence, d Decision, op infrav1.Operation) bool {
	return d.RefreshOnly || op == infrav1.OperationDrift && ev.Drift.Mode == infrav1.DriftModeAccept
}

// RefreshRequestOf is the refresh request (captf.io/refresh) a Job of op answers: a Refresh's,
// or a refresh-only plan's; none for any other Job.
func RefreshRequestOf(ev Evidence, d Decision, op infrav1.Operation) string {
	if op == infrav1.OperationRefresh || op == infrav1.OperationPlan && d.RefreshOnly {
		return ev.Drift.RefreshRequest
	}
	return ""
}

// ActsOnDrift reports a drift mode under which found drift is acted on: Remediate (an apply
// follows) or Accept (a refresh follows); under any other mode it is only reported.
func ActsOnDrift(mode infrav1.DriftMode) bool {
	return mode == infrav1.DriftModeRemediate || mode == infrav1.DriftModeAccept
}
