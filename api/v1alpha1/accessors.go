package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Kind names of the reconciled kinds, as they appear in owner labels and lease labels.
const (
	TerraformClusterKind     = "TerraformCluster"
	TerraformMachineKind     = "TerraformMachine"
	TerraformMachinePoolKind = "TerraformMachinePool"
)

// GetTerraformSpec returns the shared part of the spec.
func (c *TerraformCluster) GetTerraformSpec() *TerraformSpec { return &c.Spec.TerraformSpec }

// GetTerraformStatus returns the shared part of the status.
func (c *TerraformCluster) GetTerraformStatus() *TerraformStatus { return &c.Status.TerraformStatus }

// GetConditions returns the conditions.
func (c *TerraformCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the conditions.
func (c *TerraformCluster) SetConditions(cs []metav1.Condition) { c.Status.Conditions = cs }

// GetTerraformSpec returns the shared part of the spec.
func (m *TerraformMachine) GetTerraformSpec() *TerraformSpec { return &m.Spec.TerraformSpec }

// GetTerraformStatus returns the shared part of the status.
func (m *TerraformMachine) GetTerraformStatus() *TerraformStatus { return &m.Status.TerraformStatus }

// GetConditions returns the conditions.
func (m *TerraformMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the conditions.
func (m *TerraformMachine) SetConditions(cs []metav1.Condition) { m.Status.Conditions = cs }

// GetTerraformSpec returns the shared part of the spec.
func (p *TerraformMachinePool) GetTerraformSpec() *TerraformSpec { return &p.Spec.TerraformSpec }

// GetTerraformStatus returns the shared part of the status.
func (p *TerraformMachinePool) GetTerraformStatus() *TerraformStatus {
	return &p.Status.TerraformStatus
}

// GetConditions returns the conditions.
func (p *TerraformMachinePool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the conditions.
func (p *TerraformMachinePool) SetConditions(cs []metav1.Condition) { p.Status.Conditions = cs }

// ExternallyManaged reports an object that Cluster API's contract marks as managed by someone
// else: a TerraformCluster with the annotation cluster.x-k8s.io/managed-by (whatever its value).
// CAPTF leaves such an object alone: no finalizer, no Job, no status (docs/lifecycle.md,
// "Externally managed clusters"). The contract defines the mark for infrastructure clusters
// only, so machines and pools are never externally managed.
func ExternallyManaged(o metav1.Object) bool {
	if _, ok := o.(*TerraformCluster); !ok {
		return false
	}
	_, marked := o.GetAnnotations()[ManagedByAnnotation]
	return marked
}
