package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Plan approval (ARCHITECTURE.md I9): who may set captf.io/approve-plan, and to what. Who may
// write the controller's plan records is the records rule (records.go).
const (
	// PlanApprovedReason is the Normal event the guard records on an object when it admits an
	// approval: it names the approver, the plan and its counts.
	PlanApprovedReason = "PlanApproved"
	// PlanApproversConfigMap is the ConfigMap, in the manager's namespace, that the
	// ValidatingAdmissionPolicy of config/policy reads its approver groups from (key
	// PlanApproversKey, comma-separated). The manager keeps it equal to --plan-approver-groups.
	PlanApproversConfigMap = "captf-plan-approvers"
	// PlanApproversKey is the ConfigMap's key holding the groups.
	PlanApproversKey = "groups"
)

// ParseGroups splits a comma-separated list of groups, trimming spaces and dropping empty and
// repeated entries. The manager flags, the webhook and the policy's ConfigMap all read groups
// this way.
func ParseGroups(s string) []string {
	var out []string
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// PlanChange is what one UPDATE does to the approval annotation.
type PlanChange struct {
	// ApprovalSet: the request sets captf.io/approve-plan or changes its value (removing it
	// is not an approval). Approval is the new value.
	ApprovalSet bool
	Approval    string
}

// DiffPlan compares the approval annotation of the old and the new object. It is pure.
func DiffPlan(oldObj, newObj *Marks) PlanChange {
	var ch PlanChange
	oldV, oldOK := oldObj.Annotations[infrav1.ApprovePlanAnnotation]
	newV, newOK := newObj.Annotations[infrav1.ApprovePlanAnnotation]
	if newOK && (!oldOK || oldV != newV) {
		ch.ApprovalSet, ch.Approval = true, newV
	}
	return ch
}

// Judged reports whether the change touches anything the plan rules judge.
func (c PlanChange) Judged() bool { return c.ApprovalSet }

// Approvers are the groups whose members may approve a plan (--plan-approver-groups).
type Approvers struct {
	Groups []string
}

// Member reports whether user is in one of the approver groups. An empty list admits nobody.
func (a Approvers) Member(user authenticationv1.UserInfo) bool {
	for _, g := range user.Groups {
		if g != "" && slices.Contains(a.Groups, g) {
			return true
		}
	}
	return false
}

// Who names the approver groups for a denial, and how to configure them.
func (a Approvers) Who() string {
	if len(a.Groups) == 0 {
		return "no approver group is configured, so nobody may approve a plan: start the manager with --plan-approver-groups=<group>[,<group>...]"
	}
	return "only members of the groups " + strings.Join(a.Groups, ", ") + " may approve a plan (manager flag --plan-approver-groups)"
}

// PlanVerdict is the judgement of the plan rules on one request.
type PlanVerdict struct {
	// Allowed: nothing in the request breaks a plan rule.
	Allowed bool
	// Message says why not (empty when allowed).
	Message string
	// Approved is the pending plan the request approves; nil when it approves none.
	Approved *infrav1.PlanRecord
}

// JudgePlan applies the approval rule to one UPDATE. It is pure: same inputs, same verdict.
// (captf.io/pending-plan and captf.io/applied-plan, the controller's records of plans, are
// judged with its other records: JudgeRecords.)
//
//   - A request that sets captf.io/approve-plan or changes its value is allowed only from a
//     member of the approver groups, and only when the value is the ID of the plan that waits
//     for approval in the old object (pending, from its captf.io/pending-plan annotation): an
//     ID that is not the pending plan's (an old plan's, after the inputs changed again) is
//     refused here rather than ignored later.
//
// ref names the object in messages.
func JudgePlan(ch PlanChange, user authenticationv1.UserInfo, approvers Approvers, pending *infrav1.PlanRecord, ref ObjectRef) PlanVerdict {
	if !ch.ApprovalSet {
		return PlanVerdict{Allowed: true}
	}
	if !approvers.Member(user) {
		return PlanVerdict{Message: fmt.Sprintf("CAPTF guard: this request sets %s on %s, but user %q may not approve plans: %s. Ask an approver (docs/plans.md).",
			infrav1.ApprovePlanAnnotation, ref, user.Username, approvers.Who())}
	}
	if pending == nil {
		return PlanVerdict{Message: fmt.Sprintf("CAPTF guard: this request approves plan %q on %s, but no plan waits for approval. "+
			"A plan is approved after it was saved: change the inputs, wait until status.pendingPlan names a plan, then approve its ID (docs/plans.md).",
			ch.Approval, ref)}
	}
	if ch.Approval != pending.ID {
		return PlanVerdict{Message: fmt.Sprintf("CAPTF guard: this request approves plan %q on %s, but the plan that waits for approval is %s (%s): "+
			"an approval names the pending plan's ID, and a plan made against older inputs or state is never applied. "+
			"Read it (kubectl get %s %s -o jsonpath='{.status.pendingPlan}') and approve that ID if you accept it (docs/plans.md).",
			ch.Approval, ref, pending.ID, pending.Counts(), strings.ToLower(ref.Kind), ref.Name)}
	}
	return PlanVerdict{Allowed: true, Approved: pending}
}

// PlanApprovals records the approvals the guard admits.
type PlanApprovals struct {
	// Approvers may approve plans.
	Approvers Approvers
	// Recorder emits the PlanApproved event of each approval; nil records none.
	Recorder events.EventRecorder
}

// Record logs an admitted approval and emits a Normal PlanApproved event on target (skipped
// for a dry-run request, which must have no side effects).
func (p *PlanApprovals) Record(ctx context.Context, req admission.Request, target runtime.Object, plan *infrav1.PlanRecord) {
	note := fmt.Sprintf("plan %s (%s) approved by %s", plan.ID, plan.Counts(), req.UserInfo.Username)
	if n := len(plan.Addresses); n > 0 {
		note += ": " + strings.Join(plan.Addresses[:min(n, 5)], ", ")
		if n > 5 {
			note += ", ..."
		}
	}
	if len(note) > 1024 {
		note = note[:1021] + "..."
	}
	logger := log.FromContext(ctx).WithValues("user", req.UserInfo.Username, "plan", plan.ID)
	if req.DryRun != nil && *req.DryRun {
		logger.Info("plan approval admitted (dry run: no event)")
		return
	}
	logger.Info("plan approval admitted", "groups", req.UserInfo.Groups, "counts", plan.Counts())
	if p != nil && p.Recorder != nil {
		p.Recorder.Eventf(target, nil, corev1.EventTypeNormal, PlanApprovedReason, "Approve", "%s", note)
	}
}
