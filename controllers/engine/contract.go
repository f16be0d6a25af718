package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
		return "", noBootstrapSecret(owner), nil
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

func noBootstrapSecret(owner string) *decide.Wait {
	return &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
		Message: owner + " has no bootstrap data Secret yet", RequeueAfter: DependencyWaitRequeue}
}

// SecretVersion returns the resourceVersion of a Secret in a metadata cache, and false when the
// cache does not show it (no cache, no such Secret, or one outside the cache's selector).
func SecretVersion(ctx context.Context, meta client.Reader, namespace, name string) (string, bool, error) {
	if meta == nil {
		return "", false, nil
	}
	s := SecretMetadata()
	err := meta.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read the metadata of secret %s: %w", name, err)
	}
	return s.GetResourceVersion(), true, nil
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

// ContractFingerprint fingerprints contract inputs gathered from cached reads: the inputs
// themselves, or the wait that stopped their gathering. complete says whether everything they
// hold was seen by a cache.
func ContractFingerprint(in ContractInputs, wait *decide.Wait, complete bool) (Fingerprint, error) {
	if wait != nil {
		return Fingerprint{Key: "wait: " + wait.Reason + ": " + wait.Message}, nil
	}
	key, err := json.Marshal(in)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint contract inputs: %w", err)
	}
	return Fingerprint{Key: string(key), Complete: complete}, nil
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
	return memberContract(ctx, env, obj, m, liveContent{})
}

// MemberFingerprint is MemberContract from the caches alone: the same inputs, with the two
// values MemberContract reads live (the bootstrap data, the cluster's outputs) replaced by the
// resourceVersions of their Secrets in the metadata caches. A wait, or a Secret the caches do
// not show, makes it incomplete.
func MemberFingerprint(ctx context.Context, env Env, obj Object, m Member) (Fingerprint, error) {
	v := &versionContent{complete: true}
	in, wait, err := memberContract(ctx, env, obj, m, v)
	if err != nil {
		return Fingerprint{}, err
	}
	return ContractFingerprint(in, wait, v.complete)
}

// memberContent supplies the two contract inputs of a member whose content lives in Secrets.
type memberContent interface {
	bootstrapData(ctx context.Context, env Env, namespace string, secretName *string, owner string) (string, *decide.Wait, error)
	clusterOutputs(ctx context.Context, env Env, tc *infrav1.TerraformCluster) (map[string]json.RawMessage, error)
}

// liveContent reads the content (MemberContract).
type liveContent struct{}

func (liveContent) bootstrapData(ctx context.Context, env Env, namespace string, secretName *string, owner string) (string, *decide.Wait, error) {
	return BootstrapData(ctx, env, namespace, secretName, owner)
}

func (liveContent) clusterOutputs(ctx context.Context, env Env, tc *infrav1.TerraformCluster) (map[string]json.RawMessage, error) {
	return ClusterOutputs(ctx, env, tc)
}

// versionContent stands each content in with its Secret's resourceVersion from the metadata
// caches (MemberFingerprint); complete turns false when a cache does not show the Secret.
type versionContent struct{ complete bool }

func (v *versionContent) bootstrapData(ctx context.Context, env Env, namespace string, secretName *string, owner string) (string, *decide.Wait, error) {
	if secretName == nil || *secretName == "" {
		return "", noBootstrapSecret(owner), nil
	}
	rv, ok, err := SecretVersion(ctx, env.BootstrapMeta, namespace, *secretName)
	if err != nil || !ok {
		v.complete = false
		return "unseen", nil, err
	}
	return "resourceVersion " + rv, nil, nil
}

func (v *versionContent) clusterOutputs(ctx context.Context, env Env, tc *infrav1.TerraformCluster) (map[string]json.RawMessage, error) {
	name := naming.StateSecretName(naming.StateSuffix(tc.Namespace, infrav1.TerraformClusterKind, tc.Name))
	rv, ok, err := SecretVersion(ctx, env.SecretMeta, tc.Namespace, name)
	if err != nil || !ok {
		v.complete = false
		return nil, err
	}
	return map[string]json.RawMessage{"resourceVersion": json.RawMessage(strconv.Quote(rv))}, nil
}

func memberContract(ctx context.Context, env Env, obj Object, m Member, content memberContent) (ContractInputs, *decide.Wait, error) {
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
	data, wait, err := content.bootstrapData(ctx, env, obj.GetNamespace(), details.BootstrapSecret, m.OwnerKind+" "+ownerName)
	if err != nil || wait != nil {
		return in, wait, err
	}
	outs, err := content.clusterOutputs(ctx, env, tc)
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

// MemberKind is the one Kind adapter of machines and pools: they differ only in their Cluster
// API owner, their types and how their outputs map onto the contract.
type MemberKind struct {
	Member
	// NewObject and NewObjectList return empty objects of the kind.
	NewObject     func() Object
	NewObjectList func() client.ObjectList
	// InfraRef returns the infrastructure reference of the Cluster API owner (a Machine's, a
	// MachinePool's machine template's); an owner event reaches the object it names when the
	// reference names this kind (ownerMap).
	// ok is false for an object that is no such owner.
	InfraRef func(owner client.Object) (ref clusterv1.ContractVersionedObjectReference, ok bool)
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

// Watches implements Kind: the TerraformCluster (provisioning, endpoint, outputs), the owner
// (bootstrap data name, version) and the bootstrap data Secrets of the Cluster (their content).
func (m MemberKind) Watches() []Watch {
	return []Watch{{Object: &infrav1.TerraformCluster{}}, {Object: m.NewOwner(), Map: m.ownerMap}, {BootstrapData: true}}
}

// ownerMap maps an event of the Cluster API owner to the object of this kind its
// infrastructure reference names, if it names one.
func (m MemberKind) ownerMap(_ context.Context, o client.Object) []reconcile.Request {
	ref, ok := m.InfraRef(o)
	if !ok || ref.Kind != m.Kind || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
}

// Contract implements Kind.
func (m MemberKind) Contract(ctx context.Context, env Env, obj Object) (ContractInputs, *decide.Wait, error) {
	return MemberContract(ctx, env, obj, m.Member)
}

// Fingerprint implements Kind.
func (m MemberKind) Fingerprint(ctx context.Context, env Env, obj Object) (Fingerprint, error) {
	return MemberFingerprint(ctx, env, obj, m.Member)
}

// ApplyOutputs implements Kind.
func (m MemberKind) ApplyOutputs(obj Object, st *state.State) error { return m.Outputs(obj, st) }

// Children implements Kind: machines and pools have none.
func (MemberKind) Children(context.Context, Env, Object) ([]string, error) { return nil, nil }
