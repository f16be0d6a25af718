package main

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func TestApprovalProblem(t *testing.T) {
	rec := &infrav1.PlanRecord{ID: "p2", Create: 2, Replace: 1}
	plan := &infrav1.ActiveJob{Name: "captf-x-5", Operation: infrav1.OperationPlan}
	apply := &infrav1.ActiveJob{Name: "captf-x-5", Operation: infrav1.OperationApply}
	for _, tc := range []struct {
		name       string
		rec        *infrav1.PlanRecord
		ann        map[string]string
		active     *infrav1.ActiveJob
		secretID   string
		consumedBy string
		unreadable bool
		wanted     string
		want       string // a substring; "" for none
	}{
		{name: "the pending plan, stored and not handed out", rec: rec, secretID: "p2"},
		{name: "the pending plan named by the caller", rec: rec, secretID: "p2", wanted: "p2"},
		{name: "no plan", want: "no plan waits for approval"},
		{name: "no plan, an ID named", wanted: "p1", want: "plan p1 does not wait for approval"},
		{name: "an older ID", rec: rec, secretID: "p2", wanted: "p1",
			want: "plan p1 is not the one that waits: the plan that waits for approval is p2 (create 2, update 0, replace 1, delete 0)"},
		{name: "already applied", rec: rec, secretID: "p2", ann: map[string]string{infrav1.AppliedPlanAnnotation: "p2"}, want: "already applied (" + infrav1.AppliedPlanAnnotation + ")"},
		{name: "a Plan Job makes a newer plan", rec: rec, secretID: "p2", active: plan, want: "Plan Job captf-x-5 is making a new plan, which supersedes p2"},
		{name: "an apply runs: not judged here", rec: rec, secretID: "p2", active: apply},
		{name: "the Secret holds a newer plan", rec: rec, secretID: "p3", want: "the plan Secret holds plan p3, not p2"},
		{name: "the Secret holds none", rec: rec, want: "the plan Secret holds no plan"},
		{name: "handed out", rec: rec, secretID: "p2", consumedBy: "captf-x-4", want: "already handed to Job captf-x-4"},
		{name: "the Secret unreadable: judged on the object's records", rec: rec, unreadable: true},
		{name: "the Secret unreadable, an older ID", rec: rec, unreadable: true, wanted: "p1", want: "the plan that waits for approval is p2"},
		{name: "the Secret unreadable, already applied", rec: rec, unreadable: true, ann: map[string]string{infrav1.AppliedPlanAnnotation: "p2"}, want: "already applied"},
	} {
		marks := &secretMarks{planID: tc.secretID, consumedBy: tc.consumedBy}
		if tc.unreadable {
			marks = nil
		}
		got := approvalProblem(tc.rec, tc.ann, tc.active, marks, tc.wanted)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: refused: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestJudgeLockNeverOffersToBreakALockItCannotProveStale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        LockView
		verdict  string
		commands bool
	}{
		{name: "free", v: LockView{}, verdict: LockFree},
		{name: "a person's terraform", v: LockView{LockID: "id", Info: map[string]any{"Who": "ops@laptop"}}, verdict: LockHeldOutsideCAPTF, commands: true},
		{name: "a Job whose pod runs", v: LockView{LockID: "id", Pod: "p", Job: "j", PodPhase: "Running"}, verdict: LockHeldByRunningJob},
		{name: "a Job whose pod phase is unknown", v: LockView{LockID: "id", Pod: "p", Job: "j"}, verdict: LockHeldByRunningJob},
		{name: "a Job whose pod failed", v: LockView{LockID: "id", Pod: "p", Job: "j", PodPhase: "Failed"}, verdict: LockStaleJob},
		{name: "a Job whose pod is gone", v: LockView{LockID: "id", Pod: "p", Job: "j", PodGone: true}, verdict: LockStaleJob},
	} {
		v := tc.v
		v.Kind, v.Namespace, v.Name, v.Lease = infrav1.TerraformClusterKind, "ns", "n", "lock-tfstate-default-s"
		judgeLock(&v, "s")
		if v.Verdict != tc.verdict || (len(v.Commands) > 0) != tc.commands {
			t.Errorf("%s: %s %v", tc.name, v.Verdict, v.Commands)
		}
	}
}

func TestNewestJobIsTheHighestRunSequence(t *testing.T) {
	const suffix = "0123456789abcdef"
	var items []batchv1.Job
	for _, name := range []string{naming.JobName(suffix, 10), naming.JobName(suffix, 9), "not-a-captf-job", naming.JobName(suffix, 2)} {
		items = append(items, *objects.Job("ns", name).Obj())
	}
	if got := newestJob(items, suffix); got == nil || got.Name != naming.JobName(suffix, 10) {
		t.Fatalf("newest: %v", got)
	}
	if newestJob(nil, suffix) != nil {
		t.Fatal("no Job: nil")
	}
}
