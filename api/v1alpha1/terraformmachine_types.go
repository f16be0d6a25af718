package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformMachineSpec is the desired state of a TerraformMachine.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID cannot change once set"
type TerraformMachineSpec struct {
	// providerID identifies the machine to Cluster API; the controller fills it from the
	// module's provider_id output. It cannot change once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// health says when the module's health output (docs/module-contract.md) makes the
	// machine not Ready, so that a MachineHealthCheck replaces it (docs/cluster-api.md,
	// "CAPTF's own health signal"). A module without a health output is never affected.
	// +optional
	Health *MachineHealthSpec `json:"health,omitempty"`

	TerraformSpec `json:",inline"`
}

// DefaultUnhealthyThreshold is spec.health.unhealthyThreshold when it is not set.
const DefaultUnhealthyThreshold = 3

// MachineHealthSpec is the health signal's setting.
type MachineHealthSpec struct {
	// unhealthyThreshold is how many consecutive unhealthy samples of the health output (one
	// per successful apply and per successful drift check) turn Ready False with the reason
	// InfrastructureUnhealthy; a healthy sample starts the count again. Default 3, 1 to 100
	// (bounds: api/v1alpha1/schema_test.go "bounds spec.health.unhealthyThreshold"; the rule:
	// TestHealthRecordCounting and TestSetReadyOnUnhealthyInfrastructure in controllers/decide,
	// the engine spec "Health samples", e2e "CAPTF's own health signal under the real Cluster
	// API").
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	UnhealthyThreshold int32 `json:"unhealthyThreshold,omitempty"`
}

// MachineHealthStatus reports the health samples (from the annotation captf.io/health).
type MachineHealthStatus struct {
	// lastSampleTime is when the last sample was counted.
	// +optional
	LastSampleTime *metav1.Time `json:"lastSampleTime,omitempty"`
	// job is the Job whose apply or drift check gave the last sample.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Job string `json:"job,omitempty"`
	// consecutiveUnhealthy counts the unhealthy samples since the last healthy one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsecutiveUnhealthy int32 `json:"consecutiveUnhealthy,omitempty"`
}

// TerraformMachineStatus is the observed state of a TerraformMachine.
type TerraformMachineStatus struct {
	TerraformStatus `json:",inline"`

	// addresses of the machine (output addresses).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain the machine runs in (output failure_domain).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// health reports the samples of the module's health output; the condition
	// InfrastructureHealthy says what the last one read.
	// +optional
	Health *MachineHealthStatus `json:"health,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=terraformmachines,scope=Namespaced,categories=cluster-api;captf,shortName=tfm
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Ready"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.name",description="Active Job"
// +kubebuilder:printcolumn:name="Operation",type="string",JSONPath=".status.activeJob.operation",description="Operation of the active Job"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1,description="Provider ID"
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".status.pendingPlan.id",description="Plan awaiting approval (approve: captf.io/approve-plan=<id>)"
// +kubebuilder:printcolumn:name="Create",type="integer",JSONPath=".status.pendingPlan.create",description="Resources the pending plan creates"
// +kubebuilder:printcolumn:name="Update",type="integer",JSONPath=".status.pendingPlan.update",description="Resources the pending plan updates"
// +kubebuilder:printcolumn:name="Replace",type="integer",JSONPath=".status.pendingPlan.replace",description="Resources the pending plan replaces"
// +kubebuilder:printcolumn:name="Delete",type="integer",JSONPath=".status.pendingPlan.delete",description="Resources the pending plan deletes"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachine provisions one Machine's infrastructure with a Terraform/OpenTofu module.
type TerraformMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   TerraformMachineSpec   `json:"spec"`
	Status TerraformMachineStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformMachineList is a list of TerraformMachines.
type TerraformMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachine `json:"items"`
}

// TerraformMachineTemplateResource describes the TerraformMachine a template stamps out.
type TerraformMachineTemplateResource struct {
	// metadata added to the stamped object.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the stamped object. Immutable, as Cluster API expects of templates: the policy
	// template-immutability (config/policy) refuses an update that changes it, with what to do
	// instead, and lets Cluster API's topology dry runs through (webhooks suite, "the
	// template-immutability policy"; e2e "the ClusterClass flavor").
	// +required
	Spec TerraformMachineSpec `json:"spec"`
}

// TerraformMachineTemplateSpec is the spec of a TerraformMachineTemplate.
type TerraformMachineTemplateSpec struct {
	// template of the TerraformMachine.
	// +required
	Template TerraformMachineTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachinetemplates,scope=Namespaced,categories=cluster-api;captf,shortName=tfmt
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachineTemplate is a template for TerraformMachines (MachineDeployments, control planes).
type TerraformMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformMachineTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TerraformMachineTemplateList is a list of TerraformMachineTemplates.
type TerraformMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachineTemplate `json:"items"`
}
