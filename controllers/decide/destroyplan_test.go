package decide

import (
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// deleting is settled evidence of a deleting object that applied before, whose state (serial 7,
// lineage L) was read, with no child left.
func deleting(ev Evidence) Evidence {
	ev.Object.Deleting, ev.Object.BlockMove = true, true
	ev.Inputs.AppliedHash, ev.State.AppliedBefore, ev.State.Read, ev.State.Serial, ev.State.Lineage, ev.State.OwnLineage = "h1", true, StatePresent, 7, "L", "L"
	ev = settled(ev)
	ev.Lag = LagView{Checked: true}
	ev.Inputs.Gathered = true
	return ev
}

func TestDecideDestroyPlanTable(t *testing.T) {
	fresh := &infrav1.PlanRecord{ID: "d1", InputsHash: "h1", Serial: 7, Lineage: "L", Delete: 3, Destroy: true}
	empty := &infrav1.PlanRecord{ID: "d2", InputsHash: "h1", Serial: 7, Lineage: "L", Destroy: true}
	violated := &infrav1.PlanRecord{ID: "d3", InputsHash: "h1", Serial: 7, Lineage: "L", Delete: 1, Destroy: true, Violations: []string{"no-db-deletes/db: deletes aws_db_instance.main"}}
	corrupt := &infrav1.PlanRecord{ID: "d4", InputsHash: "h1", Serial: 7, Lineage: "L", Delete: 1, Destroy: true, Reason: infrav1.PlanWaitCorrupt, Corrupt: "plan.txt does not match"}
	applyPlan := &infrav1.PlanRecord{ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Update: 1}
	manual := infrav1.ApplyPolicyManual
	guard := infrav1.DestructiveChangesRequireApproval
	destroyPlan := Decision{Action: ActionStart, Operation: infrav1.OperationPlan, DestroyPlan: true}
	cases := []struct {
		name string
		ev   Evidence
		want Decision
		// reason of the Deleting wait, when want is a wait.
		reason string
	}{
		{"an object that asks for nothing destroys as before, with no plan",
			deleting(Evidence{}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}, ""},
		{"Manual: the deletion makes a destroy plan first",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual}}), destroyPlan, ""},
		{"RequireApproval: the deletion makes a destroy plan first",
			deleting(Evidence{Plan: PlanEvidence{DestructiveChanges: guard}}), destroyPlan, ""},
		{"a plan policy selects it: the deletion makes a destroy plan first",
			deleting(Evidence{Plan: PlanEvidence{PolicySelected: true}}), destroyPlan, ""},
		{"an apply plan that waited is no destroy plan: a destroy plan replaces it",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: applyPlan, Approved: "p1"}}), destroyPlan, ""},
		{"Manual: the destroy plan waits for an approver, the finalizer stays",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: fresh}}),
			Decision{Action: ActionWait}, infrav1.PlanAwaitingApprovalReason},
		{"Manual: an approval of another ID destroys nothing",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: fresh, Approved: "p1"}}),
			Decision{Action: ActionWait}, infrav1.PlanAwaitingApprovalReason},
		{"Manual: the approved destroy plan is applied by a Destroy Job, that plan",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: fresh, Approved: "d1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy, PlanID: "d1"}, ""},
		{"RequireApproval: a destroy plan that deletes waits",
			deleting(Evidence{Plan: PlanEvidence{DestructiveChanges: guard, Pending: fresh}}),
			Decision{Action: ActionWait}, infrav1.PlanAwaitingApprovalReason},
		{"a destroy plan that changes nothing applies without an approver, even under Manual",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: empty}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy, PlanID: "d2"}, ""},
		{"a plan policy: a destroy plan that keeps every rule applies",
			deleting(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: fresh}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy, PlanID: "d1"}, ""},
		{"a plan policy: a destroy plan that breaks a rule waits",
			deleting(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: violated}}),
			Decision{Action: ActionWait}, infrav1.PlanPolicyViolatedReason},
		{"the verdict stays: after the policy stops selecting the object the held destroy plan still waits",
			deleting(Evidence{Plan: PlanEvidence{Pending: violated}}),
			Decision{Action: ActionWait}, infrav1.PlanPolicyViolatedReason},
		{"an approver applies a destroy plan that breaks a rule",
			deleting(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: violated, Approved: "d3"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy, PlanID: "d3"}, ""},
		{"a corrupt destroy plan is never applied, approved or not",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: corrupt, Approved: "d4"}}),
			Decision{Action: ActionWait}, infrav1.PlanCorruptReason},
		{"a corrupt destroy plan holds after nothing asks for a plan any more",
			deleting(Evidence{Plan: PlanEvidence{Pending: corrupt}}),
			Decision{Action: ActionWait}, infrav1.PlanCorruptReason},
		{"a changed state serial supersedes the destroy plan: a new one, never its apply",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: &infrav1.PlanRecord{ID: "d1", Serial: 6, Lineage: "L", Delete: 3, Destroy: true}, Approved: "d1"}}),
			destroyPlan, ""},
		{"a spent destroy plan (its Destroy failed) is never applied again: a new one",
			deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual, Pending: fresh, Approved: "d1", Applied: "d1"}}),
			destroyPlan, ""},
		{"the break-glass annotation destroys without a plan",
			deleting(Evidence{Object: ObjectEvidence{DestroyWithoutPlan: true}, Plan: PlanEvidence{ApplyPolicy: manual, Pending: violated}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}, ""},
		{"the break-glass annotation passes a corrupt destroy plan",
			deleting(Evidence{Object: ObjectEvidence{DestroyWithoutPlan: true}, Plan: PlanEvidence{Pending: corrupt}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}, ""},
		{"a destroy plan waits out the backoff of a failed plan",
			func() Evidence {
				ev := deleting(Evidence{Plan: PlanEvidence{ApplyPolicy: manual}})
				ev.Retry.At = now.Add(60e9)
				return ev
			}(),
			Decision{Action: ActionWait}, ""},
		{"Retain still lets go without a destroy or a plan",
			deleting(Evidence{Object: ObjectEvidence{DeletionPolicy: infrav1.DeletionPolicyRetain}, Plan: PlanEvidence{ApplyPolicy: manual}}),
			Decision{Action: ActionRetain}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Now = now
			got := Decide(tc.ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation || got.PlanID != tc.want.PlanID || got.DestroyPlan != tc.want.DestroyPlan {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if v := violations(tc.ev, got); len(v) > 0 {
				t.Fatalf("the decision breaks the invariants: %v", v)
			}
			if got.LetsGo() && tc.want.Action != ActionRetain {
				t.Fatal("a judged deletion lets the object go")
			}
			if tc.reason == "" {
				return
			}
			if got.Wait == nil || got.Wait.ConditionType != infrav1.DeletingCondition || got.Wait.Reason != tc.reason {
				t.Fatalf("waits with %+v, want Deleting %s", got.Wait, tc.reason)
			}
			p := tc.ev.Plan.Pending
			for _, must := range []string{p.ID, "destroy plan"} {
				if !strings.Contains(got.Wait.Message, must) {
					t.Fatalf("the wait %q does not say %q", got.Wait.Message, must)
				}
			}
			if tc.reason != infrav1.PlanCorruptReason && !strings.Contains(got.Wait.Message, infrav1.ApprovePlanAnnotation+"="+p.ID) {
				t.Fatalf("the wait %q does not say how to approve", got.Wait.Message)
			}
			if tc.reason == infrav1.PlanCorruptReason && !strings.Contains(got.Wait.Message, infrav1.DestroyWithoutPlanAnnotation) {
				t.Fatalf("the wait of a corrupt destroy plan %q does not name the break-glass path", got.Wait.Message)
			}
		})
	}
}

// An apply never applies a destroy plan, and a live object never makes one.
func TestALiveObjectNeverMakesOrAppliesADestroyPlan(t *testing.T) {
	held := &infrav1.PlanRecord{ID: "d1", InputsHash: "h2", Serial: 7, Lineage: "L", Delete: 3, Destroy: true, Violations: []string{"p/r: no"}}
	for _, pe := range []PlanEvidence{
		{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: held, Approved: "d1"},
		{PolicySelected: true, Pending: held, Approved: "d1"},
		{Pending: held, Approved: "d1"},
	} {
		ev := planned(Evidence{Plan: pe})
		ev.Now = now
		d := Decide(ev)
		if d.DestroyPlan || d.PlanID == "d1" || d.Operation == infrav1.OperationDestroy {
			t.Fatalf("a live object with a pending destroy plan decides %+v", d)
		}
	}
}
