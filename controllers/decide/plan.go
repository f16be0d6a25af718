package decide

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// NeedsPlan reports whether an apply of this object goes through a saved plan: every apply,
// the first included, when a plan policy selects the object (the policies judge every plan);
// else under applyPolicy Manual, or with destructiveChanges RequireApproval, every apply but
// the first (an object that never applied has no state to plan changes against).
func NeedsPlan(ev Evidence) bool {
	return ev.Plan.PolicySelected ||
		ev.State.AppliedBefore && (ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual || ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval)
}

// appliesUnapproved reports a pending plan that applies without an approver: under
// applyPolicy Automatic, when it breaks no plan policy rule and is not a destructive plan
// that destructiveChanges RequireApproval holds.
func appliesUnapproved(p *infrav1.PlanRecord, ev Evidence) bool {
	return ev.Plan.ApplyPolicy != infrav1.ApplyPolicyManual && !p.Violated() &&
		!(ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval && p.Destructive())
}

// Superseded reports a pending plan that no longer matches the inputs or the state it would
// be applied to: its ID is refused and a new plan follows (I9).
func Superseded(p *infrav1.PlanRecord, ev Evidence) bool {
	return p.InputsHash != ev.Inputs.DesiredHash || p.Serial != ev.State.Serial || (p.Lineage != "" && p.Lineage != ev.State.Lineage)
}

// decidePlan decides an apply that goes through a saved plan (I9): a new plan when there is
// none, or it was superseded, or it was applied already; its apply once approved (or, for an
// automatic object whose plan destroys and replaces nothing, at once); else a wait.
func decidePlan(ev Evidence, d Decision) Decision {
	p := ev.Plan.Pending
	switch {
	case p == nil || p.RefreshOnly || Superseded(p, ev) || p.ID == ev.Plan.Applied:
		// A pending refresh-only plan is no plan of this apply: the apply plans anew.
		d.Action, d.Operation = ActionStart, infrav1.OperationPlan
	case ev.Plan.Approved == p.ID || appliesUnapproved(p, ev):
		d.Action, d.Operation, d.PlanID = ActionStart, infrav1.OperationApply, p.ID
	case p.Violated():
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.PlanPolicyViolatedReason,
			Message: fmt.Sprintf("plan %s (%s%s) breaks plan policy rules: %s; an approver may still apply it: kubectl annotate <object> %s=%s; "+
				"or change the inputs for a new plan (docs/plans.md)",
				p.ID, p.Counts(), addressesNote(p.Addresses), strings.Join(p.Violations, "; "), infrav1.ApprovePlanAnnotation, p.ID)}
	default:
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.PlanAwaitingApprovalReason,
			Message: fmt.Sprintf("plan %s (%s%s) waits for approval: kubectl annotate <object> %s=%s (docs/plans.md)",
				p.ID, p.Counts(), addressesNote(p.Addresses), infrav1.ApprovePlanAnnotation, p.ID)}
	}
	return d
}

// decideRefreshPlan decides a refresh under applyPolicy Manual (I9 as for an apply): a new
// refresh-only plan when there is none, or the pending plan is an apply's, superseded or
// applied; its refresh once approved; else a wait for the approver.
func decideRefreshPlan(ev Evidence, d Decision) Decision {
	p := ev.Plan.Pending
	switch {
	case p == nil || !p.RefreshOnly || Superseded(p, ev) || p.ID == ev.Plan.Applied:
		d.Action, d.Operation, d.RefreshOnly = ActionStart, infrav1.OperationPlan, true
	case ev.Plan.Approved == p.ID:
		d.Action, d.Operation, d.PlanID = ActionStart, infrav1.OperationRefresh, p.ID
	default:
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.DriftJobSucceededCondition, Reason: infrav1.PlanAwaitingApprovalReason,
			Message: fmt.Sprintf("refresh-only plan %s (%s%s: changed outside Terraform, recorded in the state, no infrastructure changed) "+
				"waits for approval: kubectl annotate <object> %s=%s (docs/drift.md)",
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

// The one conversion path of a saved plan (docs/plans.md): the plan Job's state channel stores a
// runnerapi.PlanRecord in the plan Secret; bookkeeping turns it into the infrav1.PlanRecord the
// object keeps in its pending-plan annotation (PlanRecordOf); the status reports that record as
// status.pendingPlan (PendingPlanOf). Nothing else copies a plan field by field.

// PlanRecordOf is the record the object keeps of the plan the channel stored in the plan Secret
// secret, with the plan policy rules it breaks (violations, as planpolicy.Judge gives them).
// It waits because it breaks a rule (PolicyViolated), else because of policy, the object's
// applyPolicy (Manual), or because it is destructive; a refresh-only plan waits under Manual
// only.
func PlanRecordOf(rec runnerapi.PlanRecord, secret string, policy infrav1.ApplyPolicy, violations []string) *infrav1.PlanRecord {
	out := &infrav1.PlanRecord{ID: rec.ID, Job: rec.Job, Secret: secret, InputsHash: rec.InputsHash, Serial: int64(rec.StateSerial),
		Lineage: rec.StateLineage, Create: int32(rec.Create), Update: int32(rec.Update), Replace: int32(rec.Replace),
		Delete: int32(rec.Delete), Addresses: rec.Addresses, Reason: string(infrav1.ApplyPolicyManual), RefreshOnly: rec.RefreshOnly,
		Violations: violations}
	switch {
	case len(violations) > 0:
		out.Reason = infrav1.PlanWaitPolicyViolated
	case policy != infrav1.ApplyPolicyManual && !rec.RefreshOnly:
		out.Reason = "DestructiveChanges"
	}
	out.Created, _ = time.Parse(time.RFC3339, rec.CreatedAt)
	return out
}

// MaxPendingPlanAddresses is how many addresses status.pendingPlan lists.
const MaxPendingPlanAddresses = 50

// PendingPlanOf is status.pendingPlan for a plan record: its counts, why it waits, and at most
// MaxPendingPlanAddresses addresses.
func PendingPlanOf(p *infrav1.PlanRecord) *infrav1.PendingPlan {
	pp := &infrav1.PendingPlan{ID: p.ID, Job: p.Job, Secret: p.Secret, Create: p.Create, Update: p.Update, Replace: p.Replace,
		Delete: p.Delete, Reason: p.Reason, RefreshOnly: p.RefreshOnly, Violations: p.Violations}
	if len(p.Addresses) > 0 {
		pp.Addresses = p.Addresses[:min(len(p.Addresses), MaxPendingPlanAddresses)]
	}
	if !p.Created.IsZero() {
		t := metav1.NewTime(p.Created)
		pp.CreatedAt = &t
	}
	return pp
}
