package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformMachinePoolSpec is the desired state of a TerraformMachinePool.
type TerraformMachinePoolSpec struct {
	// providerIDList lists the provider IDs of the pool's instances; the controller fills it
	// from the module's provider_id_list output.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	TerraformSpec `json:",inline"`
}

// TerraformMachinePoolStatus is the observed state of a TerraformMachinePool.
type TerraformMachinePoolStatus struct {
	TerraformStatus `json:",inline"`

	// replicas is the number of instances the module reported (output replicas).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// ready mirrors initialization.provisioned for Cluster API versions that still read it.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// instances lists the pool's instances as the module's optional instances output reports
	// them, in the module's order: one entry for each provider ID of spec.providerIDList and no
	// other (TestMachinePoolOutputs in controllers/state; the engine spec "reports a pool's
	// instances from the instances output"). Unset when the module has no instances output.
	// Informational, as the InfraMachinePool contract says: Cluster API does not read it.
	// +optional
	// +listType=map
	// +listMapKey=providerID
	// +kubebuilder:validation:MaxItems=10000
	Instances []TerraformMachinePoolInstance `json:"instances,omitempty"`

	// readyInstances counts the entries of instances whose ready is true; unset when the module
	// has no instances output (TestPoolOutputsFillTheStatus in controllers/terraformmachinepool).
	// Not Cluster API's readyReplicas, which counts the Nodes it finds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyInstances *int32 `json:"readyInstances,omitempty"`
}

// TerraformMachinePoolInstance is one instance of a pool, as the module reports it.
type TerraformMachinePoolInstance struct {
	// providerID of the instance, one of spec.providerIDList (TestMachinePoolOutputs in
	// controllers/state).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID"`

	// ready is the module's word on the instance (for example: its cloud state is running).
	// +required
	Ready bool `json:"ready"`

	// message says more about the instance's state, when the module gives one: at most 256
	// bytes, a longer one is refused (TestMachinePoolOutputs in controllers/state).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=terraformmachinepools,scope=Namespaced,categories=cluster-api;captf,shortName=tfmp
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Ready"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Instances"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.name",description="Active Job"
// +kubebuilder:printcolumn:name="Operation",type="string",JSONPath=".status.activeJob.operation",description="Operation of the active Job"
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".status.pendingPlan.id",description="Plan awaiting approval (approve: captf.io/approve-plan=<id>)"
// +kubebuilder:printcolumn:name="Create",type="integer",JSONPath=".status.pendingPlan.create",description="Resources the pending plan creates"
// +kubebuilder:printcolumn:name="Update",type="integer",JSONPath=".status.pendingPlan.update",description="Resources the pending plan updates"
// +kubebuilder:printcolumn:name="Replace",type="integer",JSONPath=".status.pendingPlan.replace",description="Resources the pending plan replaces"
// +kubebuilder:printcolumn:name="Delete",type="integer",JSONPath=".status.pendingPlan.delete",description="Resources the pending plan deletes"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachinePool provisions a MachinePool's instances with a Terraform/OpenTofu module.
type TerraformMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   TerraformMachinePoolSpec   `json:"spec"`
	Status TerraformMachinePoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformMachinePoolList is a list of TerraformMachinePools.
type TerraformMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePool `json:"items"`
}

// TerraformMachinePoolTemplateResource describes the TerraformMachinePool a template stamps out.
type TerraformMachinePoolTemplateResource struct {
	// metadata added to the stamped object.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the stamped object. Immutable, as Cluster API expects of templates: the policy
	// template-immutability (config/policy) refuses an update that changes it, with what to do
	// instead, and lets Cluster API's topology dry runs through (webhooks suite, "the
	// template-immutability policy"; e2e "the ClusterClass flavor").
	// +required
	Spec TerraformMachinePoolSpec `json:"spec"`
}

// TerraformMachinePoolTemplateSpec is the spec of a TerraformMachinePoolTemplate.
type TerraformMachinePoolTemplateSpec struct {
	// template of the TerraformMachinePool.
	// +required
	Template TerraformMachinePoolTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachinepooltemplates,scope=Namespaced,categories=cluster-api;captf,shortName=tfmpt
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachinePoolTemplate is a template for TerraformMachinePools.
type TerraformMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformMachinePoolTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TerraformMachinePoolTemplateList is a list of TerraformMachinePoolTemplates.
type TerraformMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolTemplate `json:"items"`
}
