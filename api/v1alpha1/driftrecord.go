package v1alpha1

// DriftRecord is the durable record of the last drift check's finding and of what came of it:
// the annotation captf.io/drift-finding holds it as JSON. Bookkeeping writes it in the same
// optimistic-locked metadata patch that counts the Job, and the DriftDetected condition is
// computed from it on every pass; so a status patch lost after that count (a conflict with
// another writer) never loses a finding.
// +kubebuilder:object:generate=false
type DriftRecord struct {
	// Reason is DriftDetected's reason: DriftFoundReason or NoDriftReason (a check), or
	// RemediatedReason or AcceptedReason (an apply or a refresh after drift was found).
	Reason string `json:"reason"`
	// Job is the Job the reason comes from.
	Job string `json:"job"`
	// Summary says what changed, when a check found drift.
	Summary string `json:"summary,omitempty"`
}

// Found reports a record of drift found and not yet remediated or accepted.
func (r *DriftRecord) Found() bool { return r != nil && r.Reason == DriftFoundReason }

// ParseDriftRecord reads the drift-finding annotation; nil when there is none or it is not a
// record (a hand-edited annotation reads as no finding).
func ParseDriftRecord(s string) *DriftRecord {
	r := parseRecord[DriftRecord](s)
	if r == nil || r.Job == "" {
		return nil
	}
	switch r.Reason {
	case DriftFoundReason, NoDriftReason, RemediatedReason, AcceptedReason:
		return r
	}
	return nil
}

// Annotation is the record as the drift-finding annotation holds it ("" if it cannot be
// encoded).
func (r *DriftRecord) Annotation() string { return recordAnnotation(r) }
