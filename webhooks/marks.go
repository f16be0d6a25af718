package webhooks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Marks are the parts of a reconciled object the guard protects. All three kinds share them,
// so the guard decodes only these fields and serves every kind with one handler.
type Marks struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the contract fields the controller fills from the module's outputs, which
	// the records rule judges (DiffRecords): a TerraformMachine's providerID, a
	// TerraformMachinePool's providerIDList.
	Spec struct {
		ProviderID     string   `json:"providerID,omitempty"`
		ProviderIDList []string `json:"providerIDList,omitempty"`
	} `json:"spec,omitempty"`
	Status struct {
		ActiveJob *infrav1.ActiveJob `json:"activeJob,omitempty"`
		// Initialization says whether the infrastructure is provisioned (MayOwnInfrastructure).
		Initialization *infrav1.Initialization `json:"initialization,omitempty"`
		// Conditions tell whether the object holds because of its state (StateHold).
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

// DecodeMarks reads the guarded marks of a raw object.
func DecodeMarks(raw []byte) (*Marks, error) {
	m := &Marks{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return m, nil
}

// BlockMove reports whether the object carries the block-move annotation (any value).
func (m *Marks) BlockMove() bool {
	_, ok := m.Annotations[infrav1.BlockMoveAnnotation]
	return ok
}

// HasFinalizer reports whether the object carries the provider finalizer.
func (m *Marks) HasFinalizer() bool {
	return slices.Contains(m.Finalizers, infrav1.Finalizer)
}

// ActiveJobName is status.activeJob.name, or "".
func (m *Marks) ActiveJobName() string {
	if m.Status.ActiveJob == nil {
		return ""
	}
	return m.Status.ActiveJob.Name
}

// Abandon is the captf.io/abandon-infrastructure annotation, or "".
func (m *Marks) Abandon() string { return m.Annotations[infrav1.AbandonInfrastructureAnnotation] }

// OverrideReason is the trimmed captf.io/guard-override-reason annotation, or "".
func (m *Marks) OverrideReason() string {
	return strings.TrimSpace(m.Annotations[infrav1.GuardOverrideReasonAnnotation])
}

// Change is what one UPDATE does to the guarded marks.
type Change struct {
	// BlockMoveRemoved: the old object carried block-move and the new one does not.
	BlockMoveRemoved bool
	// FinalizerRemoved: the old object carried the provider finalizer and the new one does not.
	FinalizerRemoved bool
	// OldActiveJob and NewActiveJob are status.activeJob.name before and after ("" = unset).
	OldActiveJob string
	NewActiveJob string
	// AbandonSet: the request sets the abandon-infrastructure annotation or changes its value.
	AbandonSet bool
}

// Diff compares the marks of the old and the new object. It is pure.
func Diff(oldObj, newObj *Marks) Change {
	return Change{
		BlockMoveRemoved: oldObj.BlockMove() && !newObj.BlockMove(),
		FinalizerRemoved: oldObj.HasFinalizer() && !newObj.HasFinalizer(),
		OldActiveJob:     oldObj.ActiveJobName(),
		NewActiveJob:     newObj.ActiveJobName(),
		AbandonSet:       newObj.Abandon() != "" && newObj.Abandon() != oldObj.Abandon(),
	}
}

// ActiveJobCleared reports that status.activeJob named a Job and no longer names any.
func (c Change) ActiveJobCleared() bool { return c.OldActiveJob != "" && c.NewActiveJob == "" }

// ActiveJobReplaced reports that status.activeJob named a Job and now names another.
func (c Change) ActiveJobReplaced() bool {
	return c.OldActiveJob != "" && c.NewActiveJob != "" && c.OldActiveJob != c.NewActiveJob
}

// Guarded reports whether the change removes anything the guard protects.
func (c Change) Guarded() bool {
	return c.BlockMoveRemoved || c.FinalizerRemoved || c.ActiveJobCleared() || c.ActiveJobReplaced()
}

// Describe names what the change removes, for messages, in a fixed order.
func (c Change) Describe() string {
	var parts []string
	if c.BlockMoveRemoved {
		parts = append(parts, "removes the "+infrav1.BlockMoveAnnotation+" annotation")
	}
	if c.FinalizerRemoved {
		parts = append(parts, "removes the finalizer "+infrav1.Finalizer)
	}
	if c.ActiveJobCleared() {
		parts = append(parts, fmt.Sprintf("clears status.activeJob (%s)", c.OldActiveJob))
	}
	if c.ActiveJobReplaced() {
		parts = append(parts, fmt.Sprintf("changes status.activeJob from %s to %s", c.OldActiveJob, c.NewActiveJob))
	}
	switch len(parts) {
	case 0:
		return "removes nothing the guard protects"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
