package setup

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// providerLabel marks what CAPTF installs for clusterctl; the ConfigMap carries it like the
// manifests' copy does.
const providerLabel = "cluster.x-k8s.io/provider"

// What SyncPlanApprovers found or did.
const (
	ApproversCreated = "created"
	ApproversUpdated = "updated"
	ApproversInPlace = "in place"
	// ApproversDiffer: the ConfigMap holds other groups and overwrite was false.
	ApproversDiffer = "differ"
)

// SyncPlanApprovers makes the ConfigMap webhooks.PlanApproversConfigMap in namespace hold
// groups (key webhooks.PlanApproversKey, comma-separated): it creates the ConfigMap when it is
// missing and, when overwrite is set, updates it when its groups differ; it leaves every other
// field alone. It reads and writes through c, which must not be a cache, and reports what it
// found or did (one of the Approvers* values).
func SyncPlanApprovers(ctx context.Context, c client.Client, namespace string, groups []string, overwrite bool) (string, error) {
	want := strings.Join(groups, ",")
	key := types.NamespacedName{Namespace: namespace, Name: webhooks.PlanApproversConfigMap}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, key, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: webhooks.PlanApproversConfigMap,
				Labels: map[string]string{providerLabel: "infrastructure-terraform"}},
			Data: map[string]string{webhooks.PlanApproversKey: want},
		}
		if err := c.Create(ctx, cm); err != nil {
			return "", fmt.Errorf("create configmap %s: %w", key, err)
		}
		return ApproversCreated, nil
	case err != nil:
		return "", fmt.Errorf("read configmap %s: %w", key, err)
	}
	if v, ok := cm.Data[webhooks.PlanApproversKey]; ok && v == want {
		return ApproversInPlace, nil
	}
	if !overwrite {
		return ApproversDiffer, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[webhooks.PlanApproversKey] = want
	// The update carries the resourceVersion read: a concurrent writer (the other replica)
	// makes it conflict, and the caller reads again.
	if err := c.Update(ctx, cm); err != nil {
		return "", fmt.Errorf("update configmap %s: %w", key, err)
	}
	return ApproversUpdated, nil
}

// planApprovers keeps the policy's ConfigMap equal to the approver groups. At start it
// creates or updates it; the manager stops with an error when it cannot within about a
// minute, because a policy reading other groups than the webhook judges approvals
// differently, and a missing ConfigMap makes the API server refuse every update of the three
// kinds. Then, every resync, it puts the ConfigMap back when it is missing; groups that differ
// are logged, not overwritten, so two replicas with different flags during a rollout do not
// take turns rewriting it. Every replica runs it, leader or not.
type planApprovers struct {
	client    client.Client
	namespace string
	groups    []string
	resync    time.Duration
}

// startBackoff spans about a minute: 1+2+4+8+16+30 s.
var startBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 7, Cap: 30 * time.Second}

// Start implements manager.Runnable.
func (p *planApprovers) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("configmap", p.namespace+"/"+webhooks.PlanApproversConfigMap, "groups", p.groups)
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, startBackoff, func(ctx context.Context) (bool, error) {
		did, err := SyncPlanApprovers(ctx, p.client, p.namespace, p.groups, true)
		if err != nil {
			last = err
			logger.Error(err, "could not write the plan approver groups; retrying")
			return false, nil
		}
		logger.Info("plan approver groups in place for the admission policy", "configMap", did)
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("keep the plan approvers ConfigMap %s/%s (the manager needs get, create and update on configmaps in %s; see docs/permissions.md): %w",
			p.namespace, webhooks.PlanApproversConfigMap, p.namespace, last)
	}
	ticker := time.NewTicker(p.resync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		switch did, err := SyncPlanApprovers(ctx, p.client, p.namespace, p.groups, false); {
		case err != nil:
			logger.Error(err, "could not check the plan approver groups")
		case did == ApproversCreated:
			logger.Info("put the plan approvers ConfigMap back: it was missing")
		case did == ApproversDiffer:
			logger.Info("the plan approvers ConfigMap holds other groups than this manager's --plan-approver-groups; it is set again when a manager starts")
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves the
// webhook, and every replica keeps the policy's groups equal to its own.
func (p *planApprovers) NeedLeaderElection() bool { return false }
