package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// PlanRecord is the durable record of a saved plan that waits for approval: the annotation
// captf.io/pending-plan holds it as JSON, so a move or a restart keeps it (status does not).
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
	Addresses []string `json:"addresses,omitempty"`
	// Reason it waits: Manual or DestructiveChanges.
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created,omitempty"`
}

// Destructive reports a plan that deletes or replaces a resource.
func (r *PlanRecord) Destructive() bool { return r.Delete > 0 || r.Replace > 0 }

// Changes reports a plan that changes anything.
func (r *PlanRecord) Changes() bool { return r.Create+r.Update+r.Replace+r.Delete > 0 }

// Counts says what the plan does, for messages.
func (r *PlanRecord) Counts() string {
	return fmt.Sprintf("create %d, update %d, replace %d, delete %d", r.Create, r.Update, r.Replace, r.Delete)
}

// parsePlanRecord reads the pending-plan annotation; nil when there is none or it is not a
// record (a hand-edited annotation reads as no plan, so a new plan follows).
func parsePlanRecord(s string) *PlanRecord {
	if s == "" {
		return nil
	}
	r := &PlanRecord{}
	if err := json.Unmarshal([]byte(s), r); err != nil || r.ID == "" {
		return nil
	}
	return r
}

func (r *PlanRecord) annotation() string {
	b, err := json.Marshal(r)
	if err != nil {
		return ""
	}
	return string(b)
}

// NeedsPlan reports whether an apply of this object goes through a saved plan: under
// applyPolicy Manual, or with destructiveChanges RequireApproval, for every apply but the
// first (an object that never applied has no state to plan changes against).
func NeedsPlan(ev Evidence) bool {
	return ev.AppliedBefore && (ev.ApplyPolicy == infrav1.ApplyPolicyManual || ev.DestructiveChanges == infrav1.DestructiveChangesRequireApproval)
}

// Superseded reports a pending plan that no longer matches the inputs or the state it would
// be applied to: its ID is refused and a new plan follows (I9).
func Superseded(p *PlanRecord, ev Evidence) bool {
	return p.InputsHash != ev.DesiredHash || p.Serial != ev.StateSerial || (p.Lineage != "" && p.Lineage != ev.StateLineage)
}

// decidePlan decides an apply that goes through a saved plan (I9): a new plan when there is
// none, or it was superseded, or it was applied already; its apply once approved (or, for an
// automatic object whose plan destroys and replaces nothing, at once); else a wait.
func decidePlan(ev Evidence, d Decision) Decision {
	p := ev.Pending
	switch {
	case p == nil || Superseded(p, ev) || p.ID == ev.AppliedPlan:
		d.Action, d.Operation = ActionStart, infrav1.OperationPlan
	case ev.ApprovedPlan == p.ID || (ev.ApplyPolicy != infrav1.ApplyPolicyManual && !p.Destructive()):
		d.Action, d.Operation, d.PlanID = ActionStart, infrav1.OperationApply, p.ID
	default:
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.PlanAwaitingApprovalReason,
			Message: fmt.Sprintf("plan %s (%s%s) waits for approval: kubectl annotate <object> %s=%s (docs/plans.md)",
				p.ID, p.Counts(), addressesNote(p.Addresses), infrav1.ApprovePlanAnnotation, p.ID)}
	}
	return d
}

func addressesNote(a []string) string {
	if len(a) == 0 {
		return ""
	}
	return ": " + strings.Join(a[:min(len(a), 5)], ", ") + map[bool]string{true: ", ...", false: ""}[len(a) > 5]
}

// readPlan reads the record a plan Job's state channel stored in the plan Secret, live.
func (p *pass) readPlan(ctx context.Context, cur JobView) (*PlanRecord, error) {
	s := &corev1.Secret{}
	name := naming.PlanSecretName(p.suffix)
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}, s); err != nil {
		return nil, fmt.Errorf("read plan secret %s: %w", name, err)
	}
	var rec runnerapi.PlanRecord
	if err := json.Unmarshal(s.Data[runnerapi.PlanRecordKey], &rec); err != nil {
		return nil, fmt.Errorf("read the plan record of %s: %w", name, err)
	}
	if rec.Job != cur.Name {
		return nil, fmt.Errorf("plan secret %s holds the plan of Job %s, not of %s", name, rec.Job, cur.Name)
	}
	out := &PlanRecord{ID: rec.ID, Job: rec.Job, Secret: name, InputsHash: rec.InputsHash, Serial: int64(rec.StateSerial),
		Lineage: rec.StateLineage, Create: int32(rec.Create), Update: int32(rec.Update), Replace: int32(rec.Replace),
		Delete: int32(rec.Delete), Addresses: rec.Addresses, Reason: string(infrav1.ApplyPolicyManual)}
	if p.ev.ApplyPolicy != infrav1.ApplyPolicyManual {
		out.Reason = "DestructiveChanges"
	}
	out.Created, _ = time.Parse(time.RFC3339, rec.CreatedAt)
	return out, nil
}
