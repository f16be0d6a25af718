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
	"sigs.k8s.io/controller-runtime/pkg/handler"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
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
func ClusterInfra(ctx context.Context, env Env, cluster *clusterv1.Cluster) (*infrav1.TerraformCluster, *decide.Wait, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Name == "" || ref.Kind != infrav1.TerraformClusterKind {
		return nil, &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("Cluster %s has no TerraformCluster infrastructureRef yet", cluster.Name), RequeueAfter: DependencyWaitRequeue}, nil
	}
	tc := &infrav1.TerraformCluster{}
	err := env.Cache.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name}, tc)
	if apierrors.IsNotFound(err) {
		return nil, &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("TerraformCluster %s not found", ref.Name), RequeueAfter: DependencyWaitRequeue}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get terraformcluster %s: %w", ref.Name, err)
	}
	if !tc.Status.IsProvisioned() {
		return tc, &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterInfrastructureReason,
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
func BootstrapData(ctx context.Context, env Env, namespace string, secretName *string, owner string) (string, *decide.Wait, error) {
	if secretName == nil || *secretName == "" {
		return "", &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: owner + " has no bootstrap data Secret yet", RequeueAfter: DependencyWaitRequeue}, nil
	}
	s := &corev1.Secret{}
	err := env.Live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: *secretName}, s)
	if apierrors.IsNotFound(err) {
		return "", &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
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

// Member says what a machine-like object (TerraformMachine, TerraformMachinePool) takes from
// the Cluster API object that owns it (a Machine or a MachinePool).
type Member struct {
	// Kind is the reconciled kind; OwnerKind the Cluster API owner's kind.
	Kind, OwnerKind string
	// NewOwner returns an empty owner to read into.
	NewOwner func() client.Object
	// Details returns what the module is told of the owner.
	Details func(owner client.Object) MemberDetails
}

// MemberDetails is what a machine's or pool's Cluster API owner tells its module.
type MemberDetails struct {
	// BootstrapSecret names the bootstrap data Secret (nil until the bootstrap provider made it).
	BootstrapSecret *string
	// FailureDomain is the Machine's failure domain (machines only).
	FailureDomain string
	// Version is the Kubernetes version of the Machine or MachinePool.
	Version string
	// Replicas is the MachinePool's desired replica count (pools only; nil otherwise).
	Replicas *int32
}

// MemberContract gathers a machine's or pool's contract inputs: it waits for the Cluster's
// TerraformCluster to be provisioned, for an owner of OwnerKind and for its bootstrap data,
// then adds the cluster's endpoint, network and non-sensitive outputs.
func MemberContract(ctx context.Context, env Env, obj Object, m Member) (ContractInputs, *decide.Wait, error) {
	in := ContractInputs{Kind: m.Kind, Name: obj.GetName(), Namespace: obj.GetNamespace(), ClusterName: env.ClusterName}
	cluster, err := GetCluster(ctx, env, obj.GetNamespace())
	if err != nil {
		return in, nil, err
	}
	tc, wait, err := ClusterInfra(ctx, env, cluster)
	if err != nil || wait != nil {
		return in, wait, err
	}
	ownerName := OwnerOfKind(obj, m.OwnerKind)
	if ownerName == "" {
		return in, &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: fmt.Sprintf("waiting for a %s to own this %s", m.OwnerKind, m.Kind), RequeueAfter: DependencyWaitRequeue}, nil
	}
	owner := m.NewOwner()
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ownerName}, owner); err != nil {
		if apierrors.IsNotFound(err) {
			return in, &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
				Message: fmt.Sprintf("%s %s not found", m.OwnerKind, ownerName), RequeueAfter: DependencyWaitRequeue}, nil
		}
		return in, nil, fmt.Errorf("get %s %s: %w", m.OwnerKind, ownerName, err)
	}
	details := m.Details(owner)
	data, wait, err := BootstrapData(ctx, env, obj.GetNamespace(), details.BootstrapSecret, m.OwnerKind+" "+ownerName)
	if err != nil || wait != nil {
		return in, wait, err
	}
	outs, err := ClusterOutputs(ctx, env, tc)
	if err != nil {
		return in, nil, err
	}
	ep := cluster.Spec.ControlPlaneEndpoint
	if !ep.IsValid() {
		ep = tc.Spec.ControlPlaneEndpoint
	}
	in.ControlPlaneEndpoint = &ep
	in.ClusterNetwork = &cluster.Spec.ClusterNetwork
	in.BootstrapData, in.FailureDomain, in.Version, in.ClusterOutputs = data, details.FailureDomain, details.Version, outs
	in.Replicas = details.Replicas
	return in, nil, nil
}

// MemberFingerprint fingerprints what MemberContract reads from the cache: the Cluster, its
// TerraformCluster (provisioning, endpoint, outputs) and the owner (bootstrap data name,
// version).
func MemberFingerprint(ctx context.Context, env Env, obj Object, m Member) (string, error) {
	objs := map[string]client.Object{
		"Cluster/" + env.ClusterName:                      &clusterv1.Cluster{},
		m.OwnerKind + "/" + OwnerOfKind(obj, m.OwnerKind): m.NewOwner(),
	}
	cluster := &clusterv1.Cluster{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: env.ClusterName}, cluster); err == nil {
		objs["TerraformCluster/"+cluster.Spec.InfrastructureRef.Name] = &infrav1.TerraformCluster{}
	}
	return ResourceVersions(ctx, env.Cache, obj.GetNamespace(), objs)
}

// MemberKind is the one Kind adapter of machines and pools: they differ only in their Cluster
// API owner, their types and how their outputs map onto the contract.
type MemberKind struct {
	Member
	// NewObject and NewObjectList return empty objects of the kind.
	NewObject     func() Object
	NewObjectList func() client.ObjectList
	// OwnerMap maps an event of the Cluster API owner (Machine, MachinePool) to the object its
	// infrastructure reference names.
	OwnerMap handler.MapFunc
	// Outputs maps the module's outputs onto the object (Kind.ApplyOutputs).
	Outputs func(obj Object, st *state.State) error
}

var _ Kind = MemberKind{}

// Name implements Kind.
func (m MemberKind) Name() string { return m.Kind }

// New implements Kind.
func (m MemberKind) New() Object { return m.NewObject() }

// NewList implements Kind.
func (m MemberKind) NewList() client.ObjectList { return m.NewObjectList() }

// Watches implements Kind: the TerraformCluster (provisioning, endpoint, outputs) and the
// owner (bootstrap data, version).
func (m MemberKind) Watches() []Watch {
	return []Watch{{Object: &infrav1.TerraformCluster{}}, {Object: m.NewOwner(), Map: m.OwnerMap}}
}

// Contract implements Kind.
func (m MemberKind) Contract(ctx context.Context, env Env, obj Object) (ContractInputs, *decide.Wait, error) {
	return MemberContract(ctx, env, obj, m.Member)
}

// Fingerprint implements Kind.
func (m MemberKind) Fingerprint(ctx context.Context, env Env, obj Object) (string, error) {
	return MemberFingerprint(ctx, env, obj, m.Member)
}

// ApplyOutputs implements Kind.
func (m MemberKind) ApplyOutputs(obj Object, st *state.State) error { return m.Outputs(obj, st) }

// Children implements Kind: machines and pools have none.
func (MemberKind) Children(context.Context, Env, Object) ([]string, error) { return nil, nil }
