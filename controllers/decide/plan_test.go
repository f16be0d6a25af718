package decide

import (
	"slices"
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// planned is settled evidence of an object that applied before, whose inputs changed, with
// its state read.
func planned(ev Evidence) Evidence {
	ev.Inputs.DesiredHash, ev.Inputs.AppliedHash, ev.State.AppliedBefore, ev.State.Read, ev.State.Serial, ev.State.Lineage = "h2", "h1", true, StatePresent, 7, "L"
	ev.Object.BlockMove = true
	return settled(ev)
}

func TestDecidePlanTable(t *testing.T) {
	fresh := &infrav1.PlanRecord{ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Update: 1}
	destructive := &infrav1.PlanRecord{ID: "p2", InputsHash: "h2", Serial: 7, Lineage: "L", Replace: 1}
	violated := &infrav1.PlanRecord{ID: "p3", InputsHash: "h2", Serial: 7, Lineage: "L", Create: 1, Violations: []string{"p/r: no"}}
	corrupt := &infrav1.PlanRecord{ID: "p4", InputsHash: "h2", Serial: 7, Lineage: "L", Update: 1, Reason: infrav1.PlanWaitCorrupt, Corrupt: "plan.json does not match"}
	cases := []struct {
		name string
		ev   Evidence
		want Decision
	}{
		{"Manual: changed inputs run a plan, not an apply",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"Manual: the first apply needs no plan (no state to plan against)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}, Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"Manual: a fresh plan waits for approval",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: fresh}}),
			Decision{Action: ActionWait}},
		{"Manual: an approved plan is applied, that plan",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: fresh, Approved: "p1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p1"}},
		{"Manual: an approval of another ID applies nothing",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: fresh, Approved: "p0"}}),
			Decision{Action: ActionWait}},
		{"changed inputs supersede the plan: a new plan, never its apply",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h1x", Serial: 7, Lineage: "L"}, Approved: "p1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"a changed state serial supersedes the plan",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h2", Serial: 6, Lineage: "L"}, Approved: "p1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"a plan applied once is never applied again",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: fresh, Approved: "p1", Applied: "p1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"destructive guard: a plan without deletes or replaces applies at once",
			planned(Evidence{Plan: PlanEvidence{DestructiveChanges: infrav1.DestructiveChangesRequireApproval, Pending: fresh}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p1"}},
		{"destructive guard: a replace waits for approval",
			planned(Evidence{Plan: PlanEvidence{DestructiveChanges: infrav1.DestructiveChangesRequireApproval, Pending: destructive}}),
			Decision{Action: ActionWait}},
		{"destructive guard: an approved replace applies",
			planned(Evidence{Plan: PlanEvidence{DestructiveChanges: infrav1.DestructiveChangesRequireApproval, Pending: destructive, Approved: "p2"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p2"}},
		{"Automatic without the guard applies directly",
			planned(Evidence{Plan: PlanEvidence{Pending: destructive}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a plan policy: the first apply goes through a plan",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}, Plan: PlanEvidence{PolicySelected: true}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"a plan policy: a plan that keeps every rule applies at once, destructive or not",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: destructive}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p2"}},
		{"a plan policy: a plan that breaks a rule waits",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: violated}}),
			Decision{Action: ActionWait}},
		{"a plan policy: an approver applies a plan that breaks a rule",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: violated, Approved: "p3"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p3"}},
		{"a plan policy and the destructive guard: a replace that keeps every rule still waits",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, DestructiveChanges: infrav1.DestructiveChangesRequireApproval, Pending: destructive}}),
			Decision{Action: ActionWait}},
		{"a plan policy under Manual: a plan that keeps every rule still waits",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, ApplyPolicy: infrav1.ApplyPolicyManual, Pending: fresh}}),
			Decision{Action: ActionWait}},
		{"the verdict stays: a plan that broke a rule waits after the policy stopped selecting the object",
			planned(Evidence{Plan: PlanEvidence{Pending: violated}}),
			Decision{Action: ActionWait}},
		{"the verdict stays: an approver still applies it after the policy stopped selecting the object",
			planned(Evidence{Plan: PlanEvidence{Pending: violated, Approved: "p3"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, PlanID: "p3"}},
		{"the verdict stays until a new plan: changed inputs replace the held plan (no policy: a plain apply)",
			planned(Evidence{Plan: PlanEvidence{Pending: &infrav1.PlanRecord{ID: "p3", InputsHash: "h1x", Serial: 7, Lineage: "L", Violations: []string{"p/r: no"}}}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a corrupt plan waits, approved or not",
			planned(Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: corrupt, Approved: "p4"}}),
			Decision{Action: ActionWait}},
		{"a corrupt plan waits under a policy that would let its record by",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: corrupt}}),
			Decision{Action: ActionWait}},
		{"a corrupt plan waits when nothing asks for a plan any more",
			planned(Evidence{Plan: PlanEvidence{Pending: corrupt}}),
			Decision{Action: ActionWait}},
		{"a corrupt plan superseded by changed inputs: a new plan",
			planned(Evidence{Plan: PlanEvidence{PolicySelected: true, Pending: &infrav1.PlanRecord{ID: "p4", InputsHash: "h1x", Serial: 7, Lineage: "L", Corrupt: "x"}}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Now = now
			got := Decide(tc.ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation || got.PlanID != tc.want.PlanID {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if tc.ev.Plan.Pending == violated && got.Action == ActionWait &&
				(got.Wait == nil || got.Wait.Reason != infrav1.PlanPolicyViolatedReason || !strings.Contains(got.Wait.Message, "p/r: no")) {
				t.Fatalf("a plan that breaks a rule waits with %+v, not its violations", got.Wait)
			}
			if tc.ev.Plan.Pending == corrupt && (got.Wait == nil || got.Wait.Reason != infrav1.PlanCorruptReason || !strings.Contains(got.Wait.Message, "plan.json does not match")) {
				t.Fatalf("a corrupt plan waits with %+v, not why it is corrupt", got.Wait)
			}
		})
	}
}

// TestDecidePlanNeverAppliesWhatNobodyApproved walks every combination of plan evidence and
// checks I9: an apply through a plan applies exactly the pending plan, never a superseded or
// an already applied one, and, where approval is required, only an approved one.
func TestDecidePlanNeverAppliesWhatNobodyApproved(t *testing.T) {
	records := map[string]*infrav1.PlanRecord{
		"none":       nil,
		"fresh":      {ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Update: 1},
		"freshBreak": {ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Delete: 1},
		"inputs":     {ID: "p1", InputsHash: "h1", Serial: 7, Lineage: "L", Update: 1},
		"serial":     {ID: "p1", InputsHash: "h2", Serial: 6, Lineage: "L", Update: 1},
		"lineage":    {ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "M", Update: 1},
		"violated":   {ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Create: 1, Violations: []string{"p/r: no"}},
		"corrupt":    {ID: "p1", InputsHash: "h2", Serial: 7, Lineage: "L", Update: 1, Reason: infrav1.PlanWaitCorrupt, Corrupt: "summary.json does not match"},
	}
	n := 0
	for rname, rec := range records {
		for _, approved := range []string{"", "p1", "p0"} {
			for _, applied := range []string{"", "p1"} {
				for _, policy := range []infrav1.ApplyPolicy{"", infrav1.ApplyPolicyManual} {
					for _, guard := range []infrav1.DestructiveChanges{"", infrav1.DestructiveChangesRequireApproval} {
						for _, selected := range []bool{false, true} {
							for _, remediate := range []bool{false, true} {
								ev := planned(Evidence{Plan: PlanEvidence{ApplyPolicy: policy, DestructiveChanges: guard, Pending: rec, Approved: approved, Applied: applied,
									PolicySelected: selected}})
								if remediate {
									ev.Inputs.DesiredHash, ev.Drift.Remediate, ev.Drift.Mode = "h1", "j9", infrav1.DriftModeRemediate
								}
								ev.Now = now
								d := Decide(ev)
								n++
								viaPlan := NeedsPlan(ev)
								current := rec != nil && !Superseded(rec, ev) && rec.ID != applied
								if d.Action == ActionStart && d.Operation == infrav1.OperationApply {
									switch {
									case current && rec.IsCorrupt():
										t.Fatalf("%s: applies while a corrupt plan of these inputs waits (%+v)", rname, d)
									case current && rec.Violated() && d.PlanID != rec.ID:
										t.Fatalf("%s: applies around a plan that broke a rule (the verdict must stay): %+v", rname, d)
									case current && rec.Violated() && approved != rec.ID:
										t.Fatalf("%s: a plan that broke a rule applies without approval, whatever selects the object now", rname)
									}
									switch {
									case viaPlan && d.PlanID == "":
										t.Fatalf("%s: an object that plans applies without a plan: %+v", rname, ev)
									case !viaPlan && d.PlanID != "":
										t.Fatalf("%s: a plain apply names a plan", rname)
									case viaPlan && (rec == nil || d.PlanID != rec.ID):
										t.Fatalf("%s: applies plan %q, not the pending one", rname, d.PlanID)
									case viaPlan && Superseded(rec, ev):
										t.Fatalf("%s: applies a superseded plan (I9)", rname)
									case viaPlan && rec.ID == applied:
										t.Fatalf("%s: applies a plan a second time (I9)", rname)
									case policy == infrav1.ApplyPolicyManual && approved != rec.ID:
										t.Fatalf("%s: Manual applies an unapproved plan", rname)
									case rec != nil && rec.Destructive() && guard == infrav1.DestructiveChangesRequireApproval && viaPlan && approved != rec.ID:
										t.Fatalf("%s: a destructive plan applies without approval", rname)
									case selected && !viaPlan:
										t.Fatalf("%s: an object a plan policy selects applies without a plan", rname)
									case viaPlan && rec.Violated() && approved != rec.ID:
										t.Fatalf("%s: a plan that breaks a plan policy rule applies without approval", rname)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
	if !slices.Contains(StartedOperations, infrav1.OperationPlan) {
		t.Error("Decide starts plans, which StartedOperations does not list")
	}
}

// PlanSaved says how to approve a plan only when it waits for an approver, and says that it
// applies next when the object's policies let it through.
func TestPlanSavedEventSaysWhetherThePlanWaits(t *testing.T) {
	create := &infrav1.PlanRecord{ID: "p1", Create: 1}
	replace := &infrav1.PlanRecord{ID: "p2", Replace: 1}
	violated := &infrav1.PlanRecord{ID: "p3", Create: 1, Violations: []string{"pol/r: no"}}
	destroy := &infrav1.PlanRecord{ID: "p4", Delete: 1, Destroy: true}
	auto := Evidence{}
	manual := Evidence{Plan: PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual}}
	guarded := Evidence{Plan: PlanEvidence{DestructiveChanges: infrav1.DestructiveChangesRequireApproval}}
	for _, c := range []struct {
		name  string
		pl    *infrav1.PlanRecord
		ev    Evidence
		waits bool
	}{
		{"a create-only plan under Automatic", create, auto, false},
		{"a replace under Automatic with destructive changes guarded", replace, guarded, true},
		{"a create-only plan with destructive changes guarded", create, guarded, false},
		{"any plan under Manual", create, manual, true},
		{"a plan that breaks a policy rule", violated, auto, true},
		{"a destroy plan under Manual", destroy, manual, true},
		{"a destroy plan with destructive changes guarded", destroy, guarded, true},
	} {
		e := PlanSavedEvent(c.pl, c.ev, "captf-x-4", infrav1.TerraformClusterKind, "prod")
		approve := strings.Contains(e.Message, "kubectl annotate terraformcluster prod "+infrav1.ApprovePlanAnnotation+"="+c.pl.ID)
		if e.Reason != "PlanSaved" || !strings.Contains(e.Message, "captf-x-4") || approve != c.waits || strings.Contains(e.Message, "applies next") == c.waits {
			t.Errorf("%s: %q (waits: %v)", c.name, e.Message, c.waits)
		}
	}
}
