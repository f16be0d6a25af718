package v1alpha1

import (
	"fmt"
	"time"
)

// PlanRecord is the durable record of a saved plan that waits for approval: the annotation
// captf.io/pending-plan holds it as JSON, so a move or a restart keeps it (status does not).
// The controller writes it; the admission guard reads its ID to judge an approval.
// +kubebuilder:object:generate=false
type PlanRecord struct {
	// ID is what an approver approves (captf.io/approve-plan=<ID>).
	ID string `json:"id"`
	// Job is the plan Job that made it; Secret holds the plan file and its text.
	Job    string `json:"job,omitempty"`
	Secret string `json:"secret,omitempty"`
	// InputsHash, Serial and Lineage are what it was planned against: a change of any
	// supersedes it.
	InputsHash string `json:"inputsHash"`
	Serial     int64  `json:"serial"`
	Lineage    string `json:"lineage,omitempty"`
	// The resource changes.
	Create    int32    `json:"create,omitempty"`
	Update    int32    `json:"update,omitempty"`
	Replace   int32    `json:"replace,omitempty"`
	Delete    int32    `json:"delete,omitempty"`
	Import    int32    `json:"import,omitempty"`
	Forget    int32    `json:"forget,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	// RefreshOnly: a refresh-only plan (its apply records in the state what changed outside
	// Terraform and changes no infrastructure); a Refresh Job applies it, never an apply.
	RefreshOnly bool `json:"refreshOnly,omitempty"`
	// Destroy: a destroy plan (`plan -destroy`), made when a deleting object asks for its
	// destroy to be judged (docs/deletion.md, "A destroy judged like an apply"); a Destroy Job
	// applies it, never an Apply.
	Destroy bool `json:"destroy,omitempty"`
	// Target is the targeted operation the plan carries out ("" for none): a pending plan of
	// another target (or of none) is no plan of the request the object carries now.
	Target string `json:"target,omitempty"`
	// Reason it waits: Manual, DestructiveChanges, PolicyViolated or Corrupt.
	Reason string `json:"reason,omitempty"`
	// Violations are the plan policy rules the plan breaks, as "<policy>/<rule>: <message>",
	// judged once when the plan Job ended (at most MaxPlanViolations, each at most
	// MaxPlanViolationBytes). A plan with violations applies only once approved.
	Violations []string  `json:"violations,omitempty"`
	Created    time.Time `json:"created,omitempty"`
	// Digests bind the plan Secret's artifacts to this plan: the SHA-256 of each as stored, as
	// the Plan Job's runner reported them in its result (read from the pod's status, never from
	// the Secret). The controller checks the Secret against them before it judges the plan and
	// before it creates the Job that applies it; kubectl captf plan show checks them before it
	// shows the plan (docs/plans.md, "Why the plan you approve is the plan that applies").
	Digests *PlanDigests `json:"digests,omitempty"`
	// Corrupt (Reason PlanWaitCorrupt) says which artifacts of the plan Secret did not match
	// Digests, or why the plan could not be bound to them. A corrupt plan is never applied,
	// approved or not; a change of the inputs or the state replaces it with a new plan.
	Corrupt string `json:"corrupt,omitempty"`
}

// PlanDigests are the SHA-256 (hex) of the plan Secret's artifacts as stored: the plan file
// (tfplan.gz, gzip'd), its record (summary.json), the JSON plan (plan.json) and the text
// (plan.txt). The runner's contract spells the same document (runnerapi.PlanDigests).
// +kubebuilder:object:generate=false
type PlanDigests struct {
	File   string `json:"file"`
	Record string `json:"record"`
	JSON   string `json:"json"`
	Text   string `json:"text"`
}

// PlanWaitCorrupt is PlanRecord.Reason of a plan held as corrupt: an artifact of its plan
// Secret does not match the digests its Plan Job reported.
const PlanWaitCorrupt = "Corrupt"

// PlanCorruptReason (ApplyJobSucceeded, and a Warning event): the pending plan is held as
// corrupt and is never applied (docs/runbooks/plan-corrupt.md).
const PlanCorruptReason = "PlanCorrupt"

// IsCorrupt reports a plan held as corrupt.
func (r *PlanRecord) IsCorrupt() bool { return r.Corrupt != "" }

// Bounds of PlanRecord.Violations.
const (
	MaxPlanViolations     = 10
	MaxPlanViolationBytes = 512
)

// PlanWaitPolicyViolated is PlanRecord.Reason of a plan that breaks a plan policy rule.
const PlanWaitPolicyViolated = "PolicyViolated"

// Violated reports a plan that breaks a plan policy rule.
func (r *PlanRecord) Violated() bool { return len(r.Violations) > 0 }

// Destructive reports a plan that deletes or replaces a resource.
func (r *PlanRecord) Destructive() bool { return r.Delete > 0 || r.Replace > 0 }

// KindName names the plan's kind for messages: "plan", "refresh-only plan" or "destroy plan".
func (r *PlanRecord) KindName() string {
	switch {
	case r.RefreshOnly:
		return "refresh-only plan"
	case r.Destroy:
		return "destroy plan"
	}
	return "plan"
}

// Changes reports a plan that changes anything.
func (r *PlanRecord) Changes() bool {
	return r.Create+r.Update+r.Replace+r.Delete+r.Import+r.Forget > 0
}

// Counts says what the plan does, for messages.
func (r *PlanRecord) Counts() string {
	counts := fmt.Sprintf("create %d, update %d, replace %d, delete %d", r.Create, r.Update, r.Replace, r.Delete)
	if r.Import > 0 {
		counts += fmt.Sprintf(", import %d", r.Import)
	}
	if r.Forget > 0 {
		counts += fmt.Sprintf(", forget %d", r.Forget)
	}
	return counts
}

// ParsePlanRecord reads the pending-plan annotation; nil when there is none or it is not a
// record (a hand-edited annotation reads as no plan, so a new plan follows).
func ParsePlanRecord(s string) *PlanRecord {
	r := parseRecord[PlanRecord](s)
	if r == nil || r.ID == "" {
		return nil
	}
	return r
}

// Annotation is the record as the pending-plan annotation holds it ("" if it cannot be encoded).
func (r *PlanRecord) Annotation() string { return recordAnnotation(r) }
