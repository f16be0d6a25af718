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
