package apiserver

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Generation says how the server maintains metadata.generation for a kind.
type Generation int

const (
	// GenerationNone leaves metadata.generation unset (ConfigMap, Secret, Lease, RBAC).
	GenerationNone Generation = iota
	// GenerationSpec sets 1 on create and adds 1 when .spec changes (Job, Pod, Deployment).
	GenerationSpec
	// GenerationNonMetadata sets 1 on create and adds 1 when anything outside metadata changes
	// (every custom resource; with a status subresource, status writes never reach the main
	// resource, so in effect a spec change).
	GenerationNonMetadata
)

// KindPolicy is the part of a kind's REST strategy the store models.
type KindPolicy struct {
	// ClusterScoped kinds have no namespace.
	ClusterScoped bool
	// Custom kinds follow the custom resource strategy: a create drops status (with a status
	// subresource), a status write changes status only (never metadata), an update needs a
	// resourceVersion, and strategic merge patch is refused (415).
	Custom bool
	// StatusSubresource: writes to the main resource keep the stored status, and
	// Status().Update/Patch change status only (custom) or everything but spec (built-in).
	StatusSubresource bool
	// Generation says when metadata.generation moves.
	Generation Generation
	// UnconditionalUpdate lets an Update without resourceVersion overwrite the object (most
	// built-ins); without it such an update is Invalid (custom resources, Leases).
	UnconditionalUpdate bool
}

// builtinClusterScoped are the built-in cluster-scoped kinds a scheme is likely to hold.
var builtinClusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:                                                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                             true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:               true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                           true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                    true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                true,
}

// captfGroup is CAPTF's API group; its cluster-scoped kinds are listed here and checked against
// config/crd/bases by TestDefaultKindsMatchCRDs.
const captfGroup = "infrastructure.cluster.x-k8s.io"

var customClusterScoped = map[schema.GroupKind]bool{
	{Group: captfGroup, Kind: "TerraformIdentity"}:   true,
	{Group: captfGroup, Kind: "TerraformPlanPolicy"}: true,
}

// builtinGenerationSpec are the built-in kinds whose strategy sets generation (registry
// strategies with "Generation = 1" in k8s.io/kubernetes/pkg/registry).
var builtinGenerationSpec = map[schema.GroupKind]bool{
	{Kind: "Pod"}: true, {Kind: "PodTemplate"}: true, {Kind: "ReplicationController"}: true,
	{Group: "batch", Kind: "Job"}: true, {Group: "batch", Kind: "CronJob"}: true,
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "ReplicaSet"}: true,
	{Group: "apps", Kind: "StatefulSet"}: true, {Group: "apps", Kind: "DaemonSet"}: true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:      true,
	{Group: "networking.k8s.io", Kind: "Ingress"}:       true,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:  true,
}

// builtinConditionalUpdate are the built-in kinds whose strategy refuses an update without
// resourceVersion (AllowUnconditionalUpdate false) among those a CAPTF scheme holds.
var builtinConditionalUpdate = map[schema.GroupKind]bool{
	{Group: "coordination.k8s.io", Kind: "Lease"}:                                   true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                  true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
}

// isBuiltinGroup reports whether a group is served by kube-apiserver itself rather than a CRD.
func isBuiltinGroup(group string) bool {
	switch group {
	case "", "apps", "batch", "autoscaling", "policy":
		return true
	}
	return strings.HasSuffix(group, ".k8s.io") && !strings.HasSuffix(group, ".x-k8s.io")
}

// DefaultKinds returns the policy the store uses for a kind whose Go type is t when Options.Kinds
// does not name it: a custom resource has a status subresource exactly when its type has a Status
// field (true of CAPTF's and Cluster API's CRDs; TestDefaultKindsMatchCRDs checks CAPTF's).
func DefaultKinds(gk schema.GroupKind, t reflect.Type) KindPolicy {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	_, hasStatus := t.FieldByName("Status")
	if !isBuiltinGroup(gk.Group) {
		return KindPolicy{
			ClusterScoped:     customClusterScoped[gk],
			Custom:            true,
			StatusSubresource: hasStatus,
			Generation:        GenerationNonMetadata,
		}
	}
	p := KindPolicy{
		ClusterScoped:       builtinClusterScoped[gk],
		StatusSubresource:   hasStatus,
		UnconditionalUpdate: !builtinConditionalUpdate[gk],
	}
	if builtinGenerationSpec[gk] {
		p.Generation = GenerationSpec
	}
	return p
}
