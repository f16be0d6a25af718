package decide

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func reasons(es []Event) string {
	var r []string
	for _, e := range es {
		r = append(r, e.Reason)
	}
	return strings.Join(r, ",")
}

// TestWaitEventsOnlyOnTheTransition: each Warning event of a waiting pass goes once, when the
// condition that reports it did not say so already; a pull failure has its own event and no
// start-block event beside it; a deleting pass that deletes a never-started Job reports the
// Job's trouble but no identity hold.
func TestWaitEventsOnlyOnTheTransition(t *testing.T) {
	run := JobView{Name: "j-1", Operation: infrav1.OperationApply, Phase: JobRunning}
	hold := &Wait{Reason: infrav1.RetainedStateFoundReason, Message: "held"}
	pull := &PullFailure{Image: "x", Reason: "ErrImagePull"}
	block := &StartBlock{Reason: "CreateContainerConfigError", Message: "no secret", Since: time.Unix(0, 0), Immediate: true}
	said := func(typ, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: metav1.ConditionFalse, Reason: reason}}
	}
	runCond := RunCondition(run)
	for _, tc := range []struct {
		name  string
		ev    Evidence
		d     Decision
		conds []metav1.Condition
		want  string
	}{
		{"idle, nothing to say", Evidence{}, Decision{Action: ActionIdle}, nil, ""},
		{"a hold begins", Evidence{}, Decision{Action: ActionWait, Wait: hold}, nil, infrav1.RetainedStateFoundReason},
		{"a hold already reported", Evidence{}, Decision{Action: ActionWait, Wait: hold}, said(infrav1.StateReadableCondition, infrav1.RetainedStateFoundReason), ""},
		{"a pull failure begins", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, PullFailure: pull, StartBlock: block}}, Decision{Action: ActionWaitJob}, nil, infrav1.ImagePullFailedReason},
		{"a pull failure already reported", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, PullFailure: pull}}, Decision{Action: ActionWaitJob}, said(runCond, infrav1.ImagePullFailedReason), ""},
		{"a start block begins", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, StartBlock: block}}, Decision{Action: ActionWaitJob}, nil, infrav1.JobCannotStartReason},
		{"a start block already reported", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, StartBlock: block}}, Decision{Action: ActionWaitJob}, said(runCond, infrav1.JobCannotStartReason), ""},
		{"a plain wait does not report the Job", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, PullFailure: pull}}, Decision{Action: ActionWait}, nil, ""},
		{"deleting a Job that never started", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, PullFailure: pull}}, Decision{Action: ActionDeleteJob, Wait: hold}, nil, infrav1.ImagePullFailedReason},
		{"a start reports nothing here", Evidence{Jobs: JobsEvidence{Running: []JobView{run}, PullFailure: pull}}, Decision{Action: ActionStart, Wait: hold}, nil, ""},
	} {
		if got := reasons(WaitEvents(tc.ev, tc.d, tc.conds)); got != tc.want {
			t.Errorf("%s: WaitEvents = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStartEvents: JobStarted always, after what the start means when it is not plain.
func TestStartEvents(t *testing.T) {
	pending := &infrav1.PlanRecord{ID: "p1"}
	for _, tc := range []struct {
		name string
		ev   Evidence
		d    Decision
		op   infrav1.Operation
		want string
	}{
		{"an apply", Evidence{}, Decision{}, infrav1.OperationApply, "JobStarted"},
		{"a destroy plan", Evidence{Plan: PlanEvidence{Pending: pending}}, Decision{DestroyPlan: true}, infrav1.OperationPlan, "DestroyPlanStarted,JobStarted"},
		{"a plan superseding the pending one", Evidence{Plan: PlanEvidence{Pending: pending}}, Decision{}, infrav1.OperationPlan, "PlanSuperseded,JobStarted"},
		{"a destroy by override", Evidence{Object: ObjectEvidence{DestroyWithoutPlan: true}}, Decision{}, infrav1.OperationDestroy, "DestroyWithoutPlan,JobStarted"},
		{"a destroy of a judged plan", Evidence{Object: ObjectEvidence{DestroyWithoutPlan: true}}, Decision{PlanID: "p1"}, infrav1.OperationDestroy, "JobStarted"},
	} {
		got := StartEvents(tc.ev, tc.d, tc.op, "j-2")
		if reasons(got) != tc.want {
			t.Errorf("%s: StartEvents = %q, want %q", tc.name, reasons(got), tc.want)
		}
		if last := got[len(got)-1]; last.Type != corev1.EventTypeNormal || !strings.Contains(last.Message, "j-2") {
			t.Errorf("%s: JobStarted = %+v", tc.name, last)
		}
	}
}

// TestPlanSecretProblem: a plan Secret is taken only when every artifact matches the digests
// the Job's result reported, its record reads and names that plan, and it is of the kind the
// Job was told to make.
func TestPlanSecretProblem(t *testing.T) {
	rec := runnerapi.PlanRecord{ID: "p1", Job: "j-1"}
	data := func(r runnerapi.PlanRecord) map[string][]byte {
		raw, _ := json.Marshal(r)
		return map[string][]byte{runnerapi.PlanFileKey: []byte("plan"), runnerapi.PlanRecordKey: raw, runnerapi.PlanJSONKey: []byte("{}"), runnerapi.PlanTextKey: []byte("text")}
	}
	ref := func(d map[string][]byte, id string) *runnerapi.PlanRef {
		dg := runnerapi.DigestPlanArtifacts(d)
		return &runnerapi.PlanRef{ID: id, Digests: &dg}
	}
	good := data(rec)
	destroy := rec
	destroy.Destroy = true
	targeted := rec
	targeted.Target = "replace a.b"
	for _, tc := range []struct {
		name  string
		saved *runnerapi.PlanRef
		data  map[string][]byte
		cur   JobView
		want  string
	}{
		{"bound", ref(good, "p1"), good, JobView{Name: "j-1"}, ""},
		{"no digests", &runnerapi.PlanRef{ID: "p1"}, good, JobView{Name: "j-1"}, "reports no digests"},
		{"no result", nil, good, JobView{Name: "j-1"}, "reports no digests"},
		{"an artifact rewritten", ref(good, "p1"), map[string][]byte{runnerapi.PlanFileKey: []byte("other"), runnerapi.PlanRecordKey: good[runnerapi.PlanRecordKey], runnerapi.PlanJSONKey: []byte("{}"), runnerapi.PlanTextKey: []byte("text")}, JobView{Name: "j-1"}, "tfplan"},
		{"another plan", ref(good, "p2"), good, JobView{Name: "j-1"}, "names plan p2"},
		{"a destroy plan from an apply's Plan Job", ref(data(destroy), "p1"), data(destroy), JobView{Name: "j-1"}, "records a"},
		{"a destroy plan from its own Job", ref(data(destroy), "p1"), data(destroy), JobView{Name: "j-1", DestroyPlan: true}, ""},
		{"a targeted plan from its own Job", ref(data(targeted), "p1"), data(targeted), JobView{Name: "j-1", Target: "  replace  a.b "}, ""},
		{"a targeted plan from a Job made for none", ref(data(targeted), "p1"), data(targeted), JobView{Name: "j-1"}, `records the targeted operation "replace a.b"`},
		{"a plan of no target from a Job made for one", ref(good, "p1"), good, JobView{Name: "j-1", Target: "replace a.b"}, `was made for "replace a.b"`},
	} {
		_, why := PlanSecretProblem(tc.saved, tc.data, tc.cur)
		if tc.want == "" && why != "" || tc.want != "" && !strings.Contains(why, tc.want) {
			t.Errorf("%s: PlanSecretProblem = %q, want %q", tc.name, why, tc.want)
		}
	}
	pl := &infrav1.PlanRecord{ID: "p1", Digests: DigestsOf(runnerapi.DigestPlanArtifacts(good))}
	if why := PendingPlanProblem(pl, good); why != "" {
		t.Errorf("PendingPlanProblem of a bound plan = %q", why)
	}
	if why := PendingPlanProblem(pl, data(destroy)); why == "" {
		t.Error("PendingPlanProblem took a rewritten record")
	}
	if why := PendingPlanProblem(&infrav1.PlanRecord{ID: "p1"}, good); !strings.Contains(why, "keeps no digests") {
		t.Errorf("PendingPlanProblem without digests = %q", why)
	}
}

// TestIdentityOfFallsBackToTheNewestBackup: an object that wrote states before the lineage
// annotation existed takes its newest backup's lineage; AppliedBefore counts every sign.
func TestIdentityOfFallsBackToTheNewestBackup(t *testing.T) {
	uid := types.UID("u1")
	ev := Evidence{State: StateEvidence{Backups: []BackupView{{Serial: 3, Lineage: "L3"}, {Serial: 2, Lineage: "L2"}}}}
	IdentityOf(&ev, map[string]string{infrav1.StateLineageSeenAnnotation: "L9"}, uid)
	if ev.State.OwnLineage != "L3" || !ev.State.LineageSuspect || !ev.State.AppliedBefore || ev.State.FirstRun {
		t.Errorf("IdentityOf with backups = %+v", ev.State)
	}
	ev = Evidence{}
	IdentityOf(&ev, map[string]string{infrav1.StateLineageAnnotation: "L1"}, uid)
	if ev.State.OwnLineage != "L1" || ev.State.LineageSuspect || !ev.State.AppliedBefore {
		t.Errorf("IdentityOf with the annotation = %+v", ev.State)
	}
	ev = Evidence{}
	IdentityOf(&ev, nil, uid)
	if ev.State.AppliedBefore || ev.State.OwnLineage != "" {
		t.Errorf("IdentityOf of a new object = %+v", ev.State)
	}
}

// TestAbandonPredatesWhenTheLiveObjectDiffers: an abandon the API server no longer shows as
// the cache does (gone, another incarnation, another value) is not honoured this pass.
func TestAbandonPredatesWhenTheLiveObjectDiffers(t *testing.T) {
	key := infrav1.AbandonInfrastructureAnnotation
	cached := &metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{key: "u1"}}
	for _, tc := range []struct {
		name string
		live metav1.Object
	}{
		{"gone", nil},
		{"another incarnation", &metav1.ObjectMeta{UID: "u2", Annotations: map[string]string{key: "u1"}}},
		{"the abandon removed", &metav1.ObjectMeta{UID: "u1"}},
	} {
		if !AbandonPredates(cached, tc.live) {
			t.Errorf("%s: AbandonPredates = false, want true", tc.name)
		}
	}
	// The same object with no managed fields proves nothing: the abandon counts as meant.
	if AbandonPredates(cached, &metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{key: "u1"}}) {
		t.Error("AbandonPredates of the same object without managed fields = true, want false")
	}
}

// TestJudgeCheckReadsOnlyASuccessfulChecksResult: drift found is recorded (and acted on under
// Remediate or Accept) only from a successful background check's result; a drift check of a
// kind that reports health is a health sample.
func TestJudgeCheckReadsOnlyASuccessfulChecksResult(t *testing.T) {
	found := true
	res := &runnerapi.Result{Drift: &found, Health: &runnerapi.HealthSample{}}
	drift := JobView{Name: "d1", Operation: infrav1.OperationDrift}
	b := Bookkept{Outcome: infrav1.RunSucceeded, Message: "2 to change"}
	b.JudgeCheck(drift, res, infrav1.DriftModeRemediate, true)
	if !b.DriftChecked || !b.DriftFound || !b.ActOnDrift || b.DriftSummary != "2 to change" || !b.HealthSampled {
		t.Errorf("a successful check: %+v", b)
	}
	b = Bookkept{Outcome: infrav1.RunSucceeded}
	b.JudgeCheck(drift, res, infrav1.DriftModeReport, false)
	if !b.DriftFound || b.ActOnDrift || b.HealthSampled {
		t.Errorf("a check under Report of a kind without health: %+v", b)
	}
	b = Bookkept{Outcome: infrav1.RunFailed}
	b.JudgeCheck(drift, res, infrav1.DriftModeRemediate, true)
	if b.DriftChecked || b.HealthSampled {
		t.Errorf("a failed check: %+v", b)
	}
	b = Bookkept{Outcome: infrav1.RunSucceeded}
	b.JudgeCheck(JobView{Name: "a1", Operation: infrav1.OperationApply}, res, infrav1.DriftModeRemediate, true)
	if b.DriftChecked || b.HealthSampled {
		t.Errorf("an apply: %+v", b)
	}
}
