package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of InputsValid=False for spec.job.identityRef (docs/production.md, "Scoped
// identities"). The engine checks the reference again before every Job, whatever admission let
// through, and starts no Job while one of them holds.
const (
	// IdentityNotFoundReason: spec.job.identityRef names a TerraformIdentity that does not exist.
	IdentityNotFoundReason = "IdentityNotFound"
	// IdentityNotAllowedReason: the TerraformIdentity's allowedNamespaces does not allow the
	// object's namespace (unset, a list without it, or a selector its labels do not match).
	IdentityNotAllowedReason = "IdentityNotAllowed"
	// IdentityInvalidReason: the TerraformIdentity cannot be used as it is: it sets a variable
	// CAPTF reserves, one the object's spec.job.env sets too, or names a Secret or key that is
	// missing in the manager's namespace.
	IdentityInvalidReason = "IdentityInvalid"
)

// IdentityRefAnnotation, on a Job, names the TerraformIdentity whose variables the Job reads
// from its per-run identity Secret; the controller deletes that Secret once the Job is counted.
// Only Jobs that read such a Secret carry it.
const IdentityRefAnnotation = "captf.io/identity-ref"

// TerraformIdentityRef names a cluster-scoped TerraformIdentity.
type TerraformIdentityRef struct {
	// name of the TerraformIdentity.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TerraformIdentitySpec is what a TerraformIdentity gives a Job, and to which namespaces.
type TerraformIdentitySpec struct {
	// env are the environment variables the identity sets in the main (terraform) container
	// of the Jobs of every object that references it, each taken from a key of a Secret in the
	// manager's namespace. The tenant's namespace never holds these Secrets; CAPTF copies the
	// values into a per-run Secret owned by the Job and deletes it once the Job is counted
	// (docs/production.md, "Scoped identities": e2e test "a scoped identity reaches the module
	// of an allowed namespace only"; controllers/jobs test
	// TestBuildPutsIdentityEnvOnlyInTheMainContainer). Names CAPTF reserves (CAPTF_*, TF_*,
	// TOFU_*, KUBECONFIG, KUBE_*) and names the object's own spec.job.env sets are refused
	// where the identity is used: at admission and before every Job (IdentityInvalid;
	// controllers/jobs test TestCheckTerraformIdentity).
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Env []IdentityEnvVar `json:"env"`

	// allowedNamespaces says which namespaces' objects may reference the identity, as Cluster
	// API providers do it (CAPA's AWSClusterRoleIdentity, CAPZ's AzureClusterIdentity): unset
	// allows no namespace; an empty object ({}) allows every namespace; otherwise a namespace
	// is allowed when list names it or selector matches its labels (an empty selector
	// matches none). The admission webhook refuses a reference from a namespace that is not
	// allowed (webhooks test "refuses an identity reference from a namespace the identity does
	// not allow"), and the engine checks again before every Job (InputsValid=False,
	// IdentityNotAllowed, a Warning event, no Job: engine test "holds an object whose
	// namespace lost the label its identity selects").
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`
}

// IdentityEnvVar is one environment variable of a TerraformIdentity.
type IdentityEnvVar struct {
	// name of the environment variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`

	// secretKeyRef is the key of a Secret in the manager's namespace that holds the value.
	// +required
	SecretKeyRef IdentitySecretKeyRef `json:"secretKeyRef"`
}

// IdentitySecretKeyRef selects a key of a Secret in the manager's namespace.
type IdentitySecretKeyRef struct {
	// name of the Secret, in the manager's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// AllowedNamespaces selects namespaces by name or by label.
type AllowedNamespaces struct {
	// list names allowed namespaces.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	List []string `json:"list,omitempty"`

	// selector allows the namespaces whose labels it matches; an empty selector matches none.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformidentities,scope=Cluster,categories=captf,shortName=tfid
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformIdentity is a set of credentials a platform defines once, from Secrets in the
// manager's namespace, and lets the objects of chosen namespaces use through
// spec.job.identityRef.
type TerraformIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformIdentitySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TerraformIdentityList is a list of TerraformIdentities.
type TerraformIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformIdentity `json:"items"`
}
