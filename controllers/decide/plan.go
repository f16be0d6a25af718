package decide

import (
	"encoding/json"
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
// the first (an object that never applied has no state to plan changes against); and always
// while a verdict holds the pending plan (VerdictHolds), whatever selects the object now.
func NeedsPlan(ev Evidence) bool {
	return ev.Plan.PolicySelected || VerdictHolds(ev) ||
		ev.State.AppliedBefore && (ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual || ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval)
}

// VerdictHolds reports a pending plan that a verdict holds: it breaks a plan policy rule, or it
// is corrupt, and it is still the plan of these inputs and this state (not superseded, not
// applied). The verdict stays with the plan until an approver applies it (a corrupt plan never
// applies) or a new plan replaces it: a policy deleted, or a namespace label removed, after
// the plan was judged does not let the plan, nor a plain apply of the same inputs, by
// (docs/plans.md, "Plan policies").
func VerdictHolds(ev Evidence) bool {
	p := ev.Plan.Pending
	return p != nil && !p.RefreshOnly && !p.Destroy && (p.Violated() || p.IsCorrupt()) && !Superseded(p, ev) && p.ID != ev.Plan.Applied
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
	case p == nil || p.RefreshOnly || p.Destroy || Superseded(p, ev) || p.ID == ev.Plan.Applied || p.Target != CurrentTarget(ev):
		// A pending refresh-only (or destroy) plan is no plan of this apply, nor one made for
		// another targeted operation (or for none): the apply plans anew.
		d.Action, d.Operation = ActionStart, infrav1.OperationPlan
	case p.IsCorrupt():
		d.Action, d.Wait = ActionWait, corruptWait(p, infrav1.ApplyJobSucceededCondition)
	case ev.Plan.Approved == p.ID || appliesUnapproved(p, ev):
		d.Action, d.Operation, d.PlanID = ActionStart, infrav1.OperationApply, p.ID
	default:
		d.Action = ActionWait
		d.Wait = approvalWait(p, infrav1.ApplyJobSucceededCondition, "plan "+p.ID, "; or change the inputs for a new plan", "docs/plans.md")
	}
	return d
}

// approvalWait is the wait of a plan only a person lets by: one that breaks plan policy rules
// (PlanPolicyViolated, naming them), or one that waits for approval (PlanAwaitingApproval).
// subject names the plan; instead is what else frees it (appended to the violation's message);
// doc is the page to read.
func approvalWait(p *infrav1.PlanRecord, condition, subject, instead, doc string) *Wait {
	approve := fmt.Sprintf("kubectl annotate <object> %s=%s", infrav1.ApprovePlanAnnotation, p.ID)
	if p.Violated() {
		return &Wait{ConditionType: condition, Reason: infrav1.PlanPolicyViolatedReason,
			Message: fmt.Sprintf("%s (%s%s) breaks plan policy rules: %s; an approver may still apply it: %s%s (%s)",
				subject, p.Counts(), addressesNote(p.Addresses), strings.Join(p.Violations, "; "), approve, instead, doc)}
	}
	return &Wait{ConditionType: condition, Reason: infrav1.PlanAwaitingApprovalReason,
		Message: fmt.Sprintf("%s (%s%s) waits for approval: %s (%s)", subject, p.Counts(), addressesNote(p.Addresses), approve, doc)}
}

// NeedsDestroyPlan reports whether a deleting object's destroy goes through a saved destroy
// plan (docs/deletion.md, "A destroy judged like an apply"): when the object asks for its plans
// to be judged (applyPolicy Manual, destructiveChanges RequireApproval) or a plan policy selects
// it, and always while a verdict holds its pending destroy plan (DestroyVerdictHolds). The
// override groups' break-glass annotation (DestroyWithoutPlan) destroys as an object that asks
// for nothing does.
func NeedsDestroyPlan(ev Evidence) bool {
	if ev.Object.DestroyWithoutPlan {
		return false
	}
	return ev.Plan.PolicySelected || DestroyVerdictHolds(ev) ||
		ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual || ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval
}

// DestroyVerdictHolds reports a pending destroy plan that a verdict holds (it breaks a plan
// policy rule, or it is corrupt) and that is still the plan of this state: as VerdictHolds for
// an apply, a policy that stops selecting the object does not let it by.
func DestroyVerdictHolds(ev Evidence) bool {
	p := ev.Plan.Pending
	return p != nil && p.Destroy && (p.Violated() || p.IsCorrupt()) && !DestroySuperseded(p, ev) && p.ID != ev.Plan.Applied
}

// DestroySuperseded reports a pending destroy plan made against another state than the one the
// object has now (serial or lineage). A destroy plan is made from the durable inputs of the last
// apply, which no pass of a deleting object changes, so only the state supersedes it.
func DestroySuperseded(p *infrav1.PlanRecord, ev Evidence) bool {
	return p.Serial != ev.State.Serial || (p.Lineage != "" && p.Lineage != ev.State.Lineage)
}

// destroyAppliesUnapproved reports a pending destroy plan that applies without an approver: as
// an apply's plan (appliesUnapproved), or one that changes nothing and breaks no rule (there is
// nothing to judge, and it lets the deletion finish).
func destroyAppliesUnapproved(p *infrav1.PlanRecord, ev Evidence) bool {
	return appliesUnapproved(p, ev) || !p.Changes() && !p.Violated()
}

// decideDestroyPlan decides the destroy of a deleting object that asks for it to be judged
// (NeedsDestroyPlan), as decidePlan decides an apply: a new destroy plan when there is none, or
// the pending plan is not a destroy plan, is superseded or spent; the Destroy Job of that plan
// once approved or let by its policies; else a wait that keeps the finalizer and says how to
// approve.
func decideDestroyPlan(ev Evidence, d Decision) Decision {
	p := ev.Plan.Pending
	switch {
	case p == nil || !p.Destroy || DestroySuperseded(p, ev) || p.ID == ev.Plan.Applied:
		d.Action, d.Operation, d.DestroyPlan = ActionStart, infrav1.OperationPlan, true
	case p.IsCorrupt():
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.DeletingCondition, Reason: infrav1.PlanCorruptReason,
			Message: fmt.Sprintf("destroy plan %s is held as corrupt and is never applied, approved or not: %s; find who wrote the plan Secret "+
				"(docs/runbooks/plan-corrupt.md); a change of the state replaces it, or an override group member destroys without a plan: "+
				"kubectl annotate <object> %s=<object UID> (docs/deletion.md)", p.ID, p.Corrupt, infrav1.DestroyWithoutPlanAnnotation)}
	case ev.Plan.Approved == p.ID || destroyAppliesUnapproved(p, ev):
		d.Action, d.Operation, d.PlanID = ActionStart, infrav1.OperationDestroy, p.ID
	default:
		d.Action = ActionWait
		d.Wait = approvalWait(p, infrav1.DeletingCondition, "the deletion waits: destroy plan "+p.ID, "", "docs/deletion.md")
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
	case p.IsCorrupt():
		d.Action, d.Wait = ActionWait, corruptWait(p, infrav1.DriftJobSucceededCondition)
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

// corruptWait is the wait of a plan held as corrupt: never applied, approved or not.
func corruptWait(p *infrav1.PlanRecord, condition string) *Wait {
	return &Wait{ConditionType: condition, Reason: infrav1.PlanCorruptReason,
		Message: fmt.Sprintf("plan %s is held as corrupt and is never applied, approved or not: %s; "+
			"find who wrote the plan Secret, then change the inputs (or let the state move) for a new plan (docs/runbooks/plan-corrupt.md)", p.ID, p.Corrupt)}
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
		Delete: int32(rec.Delete), Import: int32(rec.Import), Forget: int32(rec.Forget), Addresses: rec.Addresses, Reason: string(infrav1.ApplyPolicyManual), RefreshOnly: rec.RefreshOnly, Destroy: rec.Destroy,
		Target: rec.Target, Violations: violations}
	switch {
	case len(violations) > 0:
		out.Reason = infrav1.PlanWaitPolicyViolated
	case policy != infrav1.ApplyPolicyManual && !rec.RefreshOnly:
		out.Reason = "DestructiveChanges"
	}
	out.Created, _ = time.Parse(time.RFC3339, rec.CreatedAt)
	return out
}

// DigestsOf is the record's copy of the digests the Plan Job's runner reported.
func DigestsOf(d runnerapi.PlanDigests) *infrav1.PlanDigests {
	return &infrav1.PlanDigests{File: d.File, Record: d.Record, JSON: d.JSON, Text: d.Text}
}

// RunnerDigests are a record's digests as the runner's contract spells them (every digest
// empty for a record without them, which then verifies nothing).
func RunnerDigests(d *infrav1.PlanDigests) runnerapi.PlanDigests {
	if d == nil {
		return runnerapi.PlanDigests{}
	}
	return runnerapi.PlanDigests{File: d.File, Record: d.Record, JSON: d.JSON, Text: d.Text}
}

// CorruptPlanRecord is the record of a plan held as corrupt (why says which artifact did not
// match, or why nothing binds them): nothing of its plan Secret is trusted. Its ID is the one the
// Plan Job's result reported (saved), its counts those of the result's summary; it was planned
// against the Job's inputs and the state the object has now (serial and lineage, read live),
// so a change of either replaces it.
func CorruptPlanRecord(saved *runnerapi.PlanRef, summary *runnerapi.PlanSummary, job JobView, secret string, serial int64, lineage string, now time.Time, why string) *infrav1.PlanRecord {
	out := &infrav1.PlanRecord{Job: job.Name, Secret: secret, InputsHash: job.InputsHash, Serial: serial, Lineage: lineage,
		Reason: infrav1.PlanWaitCorrupt, Corrupt: why, Created: now}
	if saved != nil && runnerapi.ValidPlanID(saved.ID) {
		out.ID = saved.ID
		if saved.Digests != nil {
			out.Digests = DigestsOf(*saved.Digests)
		}
	} else {
		// No ID the result vouches for: one of the Job, so the record is a plan that waits.
		out.ID = runnerapi.PlanID("", job.InputsHash, 0, job.Name)
	}
	if summary != nil {
		out.Create, out.Update, out.Replace, out.Delete = int32(summary.Create), int32(summary.Update), int32(summary.Replace), int32(summary.Delete)
	}
	out.RefreshOnly, out.Destroy = job.RefreshOnly, job.DestroyPlan
	return out
}

// MaxPendingPlanAddresses is how many addresses status.pendingPlan lists.
const MaxPendingPlanAddresses = 50

// PendingPlanOf is status.pendingPlan for a plan record: its counts, why it waits, and at most
// MaxPendingPlanAddresses addresses.
func PendingPlanOf(p *infrav1.PlanRecord) *infrav1.PendingPlan {
	pp := &infrav1.PendingPlan{ID: p.ID, Job: p.Job, Secret: p.Secret, Create: p.Create, Update: p.Update, Replace: p.Replace,
		Delete: p.Delete, Import: p.Import, Forget: p.Forget, Reason: p.Reason, RefreshOnly: p.RefreshOnly, Destroy: p.Destroy, Target: p.Target, Violations: p.Violations}
	if len(p.Addresses) > 0 {
		pp.Addresses = p.Addresses[:min(len(p.Addresses), MaxPendingPlanAddresses)]
	}
	if !p.Created.IsZero() {
		t := metav1.NewTime(p.Created)
		pp.CreatedAt = &t
	}
	return pp
}

// PlanSecretProblem judges the plan Secret a Plan Job's state channel wrote (data) against the
// plan the Job's result names (saved, read from a pod the Job controls): every artifact must
// match the reported digests, the record must read and name that plan, and record the kind of
// plan the Job was told to make (the channel records the kind from the manager's flags; a
// record of another kind was not made by this Job's channel). It returns the record and "",
// or why the plan is to be held as corrupt.
func PlanSecretProblem(saved *runnerapi.PlanRef, data map[string][]byte, cur JobView) (runnerapi.PlanRecord, string) {
	var rec runnerapi.PlanRecord
	if saved == nil || saved.Digests == nil || !saved.Digests.Complete() {
		return rec, "the Plan Job's result reports no digests of the plan's artifacts, so nothing binds the plan Secret to the plan"
	}
	if err := saved.Digests.Verify(data); err != nil {
		return rec, err.Error()
	}
	if err := json.Unmarshal(data[runnerapi.PlanRecordKey], &rec); err != nil {
		return rec, fmt.Sprintf("the plan Secret's %s cannot be read: %v", runnerapi.PlanRecordKey, err)
	}
	if rec.ID != saved.ID {
		return rec, fmt.Sprintf("the plan Secret's %s records plan %s, but the Plan Job's result names plan %s", runnerapi.PlanRecordKey, rec.ID, saved.ID)
	}
	if rec.RefreshOnly != cur.RefreshOnly || rec.Destroy != cur.DestroyPlan {
		recorded, made := infrav1.PlanRecord{RefreshOnly: rec.RefreshOnly, Destroy: rec.Destroy}, infrav1.PlanRecord{RefreshOnly: cur.RefreshOnly, Destroy: cur.DestroyPlan}
		return rec, fmt.Sprintf("the plan Secret's %s records a %s, but Job %s made a %s", runnerapi.PlanRecordKey,
			recorded.KindName(), cur.Name, made.KindName())
	}
	if made := CanonicalTarget(cur.Target); rec.Target != made {
		return rec, fmt.Sprintf("the plan Secret's %s records the targeted operation %q, but Job %s was made for %q", runnerapi.PlanRecordKey,
			rec.Target, cur.Name, made)
	}
	return rec, ""
}

// CanonicalTarget is the canonical form of a request as written ("" for none or one that
// cannot be read: no Job is made for it).
func CanonicalTarget(req string) string {
	t, err := runnerapi.ParseTarget(req)
	if req == "" || err != nil {
		return ""
	}
	return t.String()
}

// PendingPlanProblem judges the plan Secret (data) against the pending plan's record just
// before the Job that applies it starts: "" when every artifact still matches the digests the
// record keeps, else why the plan is to be held as corrupt.
func PendingPlanProblem(pl *infrav1.PlanRecord, data map[string][]byte) string {
	if pl.Digests == nil {
		return "the pending plan's record keeps no digests of its artifacts, so nothing binds the plan Secret to it"
	}
	if err := RunnerDigests(pl.Digests).Verify(data); err != nil {
		return err.Error()
	}
	return ""
}

// CorruptPlanEvent is the Warning event of a plan held as corrupt.
func CorruptPlanEvent(pl *infrav1.PlanRecord) Event {
	return Event{EventWarning, infrav1.PlanCorruptReason, fmt.Sprintf(
		"plan %s (Job %s) is held as corrupt and will never be applied: %s; see docs/runbooks/plan-corrupt.md", pl.ID, pl.Job, pl.Corrupt)}
}

// PlanSavedEvent is the event of a plan Job that saved a plan with changes: how to approve it
// when it waits for an approver, or that it applies next when the object's policies let it
// through unapproved (applyPolicy Automatic, no plan policy rule broken, and nothing
// destructive where destructive changes need approval). job is the plan Job; kind and name say
// how to annotate the object.
func PlanSavedEvent(pl *infrav1.PlanRecord, ev Evidence, job, kind, name string) Event {
	saved := fmt.Sprintf("saved %s %s (%s)", pl.KindName(), pl.ID, pl.Counts())
	lets := appliesUnapproved(pl, ev)
	if pl.Destroy {
		lets = destroyAppliesUnapproved(pl, ev)
	}
	if lets {
		return Event{EventNormal, "PlanSaved", fmt.Sprintf("Job %s %s; no approval is needed under the object's policies: it applies next", job, saved)}
	}
	return Event{EventNormal, "PlanSaved", fmt.Sprintf("Job %s %s; it applies once approved: kubectl annotate %s %s %s=%s",
		job, saved, strings.ToLower(kind), name, infrav1.ApprovePlanAnnotation, pl.ID)}
}
