package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Helpers the per-kind adapters share to gather contract inputs.

// DependencyWaitRequeue is how often a dependency wait looks again (watches usually come first).
const DependencyWaitRequeue = 30 * time.Second

// GetCluster reads the owning Cluster from the cache.
func GetCluster(ctx context.Context, env Env, namespace string) (*clusterv1.Cluster, error) {
	c := &clusterv1.Cluster{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: env.ClusterName}, c); err != nil {
		return nil, fmt.Errorf("get cluster %s: %w", env.ClusterName, err)
	}
	return c, nil
}

// ClusterInfra finds the TerraformCluster of a Cluster (its infrastructureRef) and says whether
// machines may start: it must be provisioned. A nil *Wait means ready.
func ClusterInfra(ctx context.Context, env Env, cluster *clusterv1.Cluster) (*infrav1.TerraformCluster, *Wait, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Name == "" || ref.Kind != infrav1.TerraformClusterKind {
		return nil, &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("Cluster %s has no TerraformCluster infrastructureRef yet", cluster.Name), RequeueAfter: DependencyWaitRequeue}, nil
	}
	tc := &infrav1.TerraformCluster{}
	err := env.Cache.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name}, tc)
	if apierrors.IsNotFound(err) {
		return nil, &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("TerraformCluster %s not found", ref.Name), RequeueAfter: DependencyWaitRequeue}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get terraformcluster %s: %w", ref.Name, err)
	}
	if !tc.Status.IsProvisioned() {
		return tc, &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("waiting for TerraformCluster %s to be provisioned", tc.Name), RequeueAfter: DependencyWaitRequeue}, nil
	}
	return tc, nil, nil
}

// ClusterOutputs reads the non-sensitive outputs of a TerraformCluster's state (live), for its
// machines and pools.
func ClusterOutputs(ctx context.Context, env Env, tc *infrav1.TerraformCluster) (map[string]json.RawMessage, error) {
	suffix := naming.StateSuffix(tc.Namespace, infrav1.TerraformClusterKind, tc.Name)
	st, err := state.Read(ctx, env.Live, tc.Namespace, suffix)
	if errors.Is(err, state.ErrNoState) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	return state.ClusterOutputsForMachines(st), nil
}

// BootstrapData reads the `value` of a bootstrap data Secret (live). An unset name or a missing
// Secret is a wait.
func BootstrapData(ctx context.Context, env Env, namespace string, secretName *string, owner string) (string, *Wait, error) {
	if secretName == nil || *secretName == "" {
		return "", &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: owner + " has no bootstrap data Secret yet", RequeueAfter: DependencyWaitRequeue}, nil
	}
	s := &corev1.Secret{}
	err := env.Live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: *secretName}, s)
	if apierrors.IsNotFound(err) {
		return "", &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: fmt.Sprintf("bootstrap data Secret %s not found", *secretName), RequeueAfter: DependencyWaitRequeue}, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read bootstrap data: %w", err)
	}
	return string(s.Data["value"]), nil, nil
}

// OwnerOfKind returns the name of the object's controller owner of the given Cluster API kind.
func OwnerOfKind(obj metav1.Object, kind string) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && groupOf(ref.APIVersion) == clusterv1.GroupVersion.Group {
			return ref.Name
		}
	}
	return ""
}

func groupOf(apiVersion string) string {
	for i := range apiVersion {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// ListOwned lists objects of list's type in a namespace that carry the cluster-name label.
func ListOwned(ctx context.Context, r client.Reader, list client.ObjectList, namespace, cluster string) error {
	return r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})
}

// ResourceVersions fingerprints cached objects by kind, name and resourceVersion; a missing
// object counts as "absent", so its appearance changes the fingerprint too.
func ResourceVersions(ctx context.Context, r client.Reader, namespace string, objs map[string]client.Object) (string, error) {
	keys := make([]string, 0, len(objs))
	for name := range objs {
		keys = append(keys, name)
	}
	sort.Strings(keys)
	out := ""
	for _, name := range keys {
		o := objs[name]
		rv := "absent"
		if objName := name[strings.Index(name, "/")+1:]; objName != "" && o != nil {
			err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: objName}, o)
			switch {
			case err == nil:
				rv = o.GetResourceVersion()
			case !apierrors.IsNotFound(err):
				return "", fmt.Errorf("fingerprint %s: %w", name, err)
			}
		}
		out += name + "@" + rv + ";"
	}
	return out, nil
}
