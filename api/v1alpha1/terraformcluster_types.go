package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformClusterSpec is the desired state of a TerraformCluster.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || !has(oldSelf.controlPlaneEndpoint.host) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="controlPlaneEndpoint cannot change once set"
type TerraformClusterSpec struct {
	// controlPlaneEndpoint is the endpoint of the cluster's API server. Set it to use a known
	// endpoint, or leave it empty: the controller fills it from the module's
	// control_plane_endpoint output. It cannot change once set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.host) == has(self.port)",message="set controlPlaneEndpoint.host and controlPlaneEndpoint.port together"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	TerraformSpec `json:",inline"`
}

// TerraformClusterStatus is the observed state of a TerraformCluster.
type TerraformClusterStatus struct {
	TerraformStatus `json:",inline"`

	// failureDomains the module reported (output failure_domains).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=terraformclusters,scope=Namespaced,categories=cluster-api;captf,shortName=tfc
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Ready"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.name",description="Active Job"
// +kubebuilder:printcolumn:name="Operation",type="string",JSONPath=".status.activeJob.operation",description="Operation of the active Job"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",priority=1,description="Control plane endpoint"
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".status.pendingPlan.id",description="Plan awaiting approval (approve: captf.io/approve-plan=<id>)"
// +kubebuilder:printcolumn:name="Create",type="integer",JSONPath=".status.pendingPlan.create",description="Resources the pending plan creates"
// +kubebuilder:printcolumn:name="Update",type="integer",JSONPath=".status.pendingPlan.update",description="Resources the pending plan updates"
// +kubebuilder:printcolumn:name="Replace",type="integer",JSONPath=".status.pendingPlan.replace",description="Resources the pending plan replaces"
// +kubebuilder:printcolumn:name="Delete",type="integer",JSONPath=".status.pendingPlan.delete",description="Resources the pending plan deletes"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformCluster provisions a Cluster's infrastructure with a Terraform/OpenTofu module.
type TerraformCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   TerraformClusterSpec   `json:"spec"`
	Status TerraformClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformClusterList is a list of TerraformClusters.
type TerraformClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformCluster `json:"items"`
}

// TerraformClusterTemplateResource describes the TerraformCluster a template stamps out.
type TerraformClusterTemplateResource struct {
	// metadata added to the stamped object.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the stamped object. Immutable, as Cluster API expects of templates: the policy
	// template-immutability (config/policy) refuses an update that changes it, with what to do
	// instead, and lets Cluster API's topology dry runs through (webhooks suite, "the
	// template-immutability policy"; e2e "the ClusterClass flavor").
	// +required
	Spec TerraformClusterSpec `json:"spec"`
}

// TerraformClusterTemplateSpec is the spec of a TerraformClusterTemplate.
type TerraformClusterTemplateSpec struct {
	// template of the TerraformCluster.
	// +required
	Template TerraformClusterTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformclustertemplates,scope=Namespaced,categories=cluster-api;captf,shortName=tfct
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformClusterTemplate is a template for TerraformClusters, meant for ClusterClass (its
// stamped spec is validated; stamping through Cluster API's controllers is not tested yet).
type TerraformClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TerraformClusterTemplateList is a list of TerraformClusterTemplates.
type TerraformClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterTemplate `json:"items"`
}
