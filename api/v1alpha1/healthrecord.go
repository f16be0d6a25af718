package v1alpha1

import "time"

// HealthRecord is the durable record of a TerraformMachine's health samples: the annotation
// captf.io/health holds it as JSON. Bookkeeping writes it in the same optimistic-locked
// metadata patch that counts the Job whose apply or drift check gave the sample, so a status
// patch lost after that count never loses a sample, and a sample is counted once.
// +kubebuilder:object:generate=false
type HealthRecord struct {
	// Job gave the last sample, At is when it was counted (RFC 3339).
	Job string `json:"job"`
	At  string `json:"at"`
	// Missing: the module exports no health output (the count is 0).
	Missing bool `json:"missing,omitempty"`
	// Invalid says why the last value did not fit the contract (that sample is not counted).
	Invalid string `json:"invalid,omitempty"`
	// Healthy and Message are what the last valid sample said.
	Healthy bool   `json:"healthy,omitempty"`
	Message string `json:"message,omitempty"`
	// Unhealthy counts the consecutive unhealthy samples.
	Unhealthy int32 `json:"unhealthy,omitempty"`
}

// HealthReporter is a kind whose module may export a health output (TerraformMachine).
// +kubebuilder:object:generate=false
type HealthReporter interface {
	// HealthThreshold is spec.health.unhealthyThreshold, or its default.
	HealthThreshold() int32
	// SetHealthStatus sets status.health.
	SetHealthStatus(*MachineHealthStatus)
}

// HealthThreshold is spec.health.unhealthyThreshold, or DefaultUnhealthyThreshold.
func (m *TerraformMachine) HealthThreshold() int32 {
	if h := m.Spec.Health; h != nil && h.UnhealthyThreshold > 0 {
		return h.UnhealthyThreshold
	}
	return DefaultUnhealthyThreshold
}

// SetHealthStatus sets status.health.
func (m *TerraformMachine) SetHealthStatus(s *MachineHealthStatus) { m.Status.Health = s }

// ParseHealthRecord reads the health annotation; nil when there is none or it is not a record
// (a hand-edited annotation reads as no sample).
func ParseHealthRecord(s string) *HealthRecord {
	r := parseRecord[HealthRecord](s)
	if r == nil || r.Job == "" || r.Unhealthy < 0 {
		return nil
	}
	if _, err := time.Parse(time.RFC3339, r.At); err != nil {
		return nil
	}
	return r
}

// Annotation is the record as the health annotation holds it ("" if it cannot be encoded).
func (r *HealthRecord) Annotation() string { return recordAnnotation(r) }
