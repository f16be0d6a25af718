package jobs

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func testJob(conds ...batchv1.JobCondition) *batchv1.Job {
	return objects.Job("ns", "captf-0123456789abcdef-1").UID("job-uid").
		With(func(j *batchv1.Job) { j.Status.Conditions = conds }).Obj()
}

func cond(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: "Job " + reason}
}

// testPod is a pod of testJob whose main container terminated with a message and exit code.
func testPod(uid string, created time.Time, exit int32, reason, message string, conds ...corev1.PodCondition) corev1.Pod {
	phase := corev1.PodSucceeded
	if exit != 0 {
		phase = corev1.PodFailed
	}
	job := testJob()
	return *objects.PodOf(job, "p-"+uid).ControlledBy(job).Phase(phase).With(func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Conditions = conds
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: InstallContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: "installed"}}},
			{Name: MainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, Message: message}}},
		}
	}).Obj()
}

func resultDoc(outcome runnerapi.Outcome, errText string, changes *bool) string {
	return string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: outcome, Error: errText, Changes: changes,
		Steps: []runnerapi.Step{{Name: "init"}}}))
}

func TestOutcomeOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleting := testJob()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	falseFailed := testJob(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionFalse})
	foreign := testPod("other", t0.Add(time.Hour), 0, "", resultDoc(runnerapi.OutcomeSucceeded, "", nil))
	foreign.OwnerReferences[0].UID = "another-job"

	cases := []struct {
		name         string
		job          *batchv1.Job
		pods         []corev1.Pod
		decided      bool
		outcome      infrav1.RunOutcome
		reason       string
		msgHas       string
		resultParsed bool
	}{
		{"no condition: running", testJob(), nil, false, "", ReasonRunning, "", false},
		{"a false condition is not terminal", falseFailed, nil, false, "", ReasonRunning, "", false},
		{"deleted before finishing: interrupted, not finished", deleting, nil, false, infrav1.RunInterrupted, ReasonDeleted, "deleted before it finished", false},
		{"complete", testJob(cond(batchv1.JobComplete, "CompletionsReached")), []corev1.Pod{testPod("a", t0, 0, "", resultDoc(runnerapi.OutcomeSucceeded, "", nil))},
			true, infrav1.RunSucceeded, ReasonCompleted, "", true},
		{"success criteria met before complete", testJob(cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached")), nil, true, infrav1.RunSucceeded, ReasonCompleted, "", false},
		{"plan changes in the message", testJob(cond(batchv1.JobComplete, "CompletionsReached")),
			[]corev1.Pod{testPod("a", t0, 0, "", resultDoc(runnerapi.OutcomeSucceeded, "", ptr.To(true)))}, true, infrav1.RunSucceeded, ReasonCompleted, "changes: true", true},
		{"deadline: interrupted even before the pod stopped", testJob(cond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded)), nil,
			true, infrav1.RunInterrupted, batchv1.JobReasonDeadlineExceeded, "DeadlineExceeded", false},
		{"terraform failed", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, runnerapi.ExitTerraformFailed, "Error", resultDoc(runnerapi.OutcomeFailed, "apply exited with code 1\nError: quota", nil))},
			true, infrav1.RunFailed, batchv1.JobReasonBackoffLimitExceeded, "Error: quota", true},
		{"runner says interrupted", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, runnerapi.ExitInterrupted, "Error", resultDoc(runnerapi.OutcomeInterrupted, "interrupted by terminated during apply", nil))},
			true, infrav1.RunInterrupted, batchv1.JobReasonBackoffLimitExceeded, "interrupted by terminated", true},
		{"evicted pod without a result", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, 137, "Error", "", corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})},
			true, infrav1.RunInterrupted, batchv1.JobReasonBackoffLimitExceeded, "killed", false},
		{"OOM killed", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, 137, "OOMKilled", "")}, true, infrav1.RunFailed, batchv1.JobReasonBackoffLimitExceeded, "code 137", false},
		{"binary missing, no result", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, runnerapi.ExitBinaryMissing, "Error", "garbage")}, true, infrav1.RunFailed, batchv1.JobReasonBackoffLimitExceeded, "no terraform or tofu binary", false},
		{"no pods left", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)), nil, true, infrav1.RunFailed, batchv1.JobReasonBackoffLimitExceeded, "left no result", false},
		{"fenced: the runner says so", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, runnerapi.ExitFenced, "Error", resultDoc(runnerapi.OutcomeFenced, "fenced: the object's run lease names captf-x-9", nil))},
			true, infrav1.RunFenced, batchv1.JobReasonBackoffLimitExceeded, "run lease names captf-x-9", true},
		{"fenced, no result: the exit code says so", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{testPod("a", t0, runnerapi.ExitFenced, "Error", "")},
			true, infrav1.RunFenced, batchv1.JobReasonBackoffLimitExceeded, "fenced", false},
		{"another Job's pod is ignored", testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			[]corev1.Pod{foreign, testPod("a", t0, runnerapi.ExitTerraformFailed, "Error", resultDoc(runnerapi.OutcomeFailed, "mine", nil))},
			true, infrav1.RunFailed, batchv1.JobReasonBackoffLimitExceeded, "mine", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := OutcomeOf(tc.job, tc.pods)
			if got.Decided != tc.decided || got.Outcome != tc.outcome || got.Reason != tc.reason {
				t.Fatalf("got decided=%v outcome=%q reason=%q, want %v %q %q", got.Decided, got.Outcome, got.Reason, tc.decided, tc.outcome, tc.reason)
			}
			if c, _ := jobstatus.Decided(tc.job); got.Decided != (c != nil) {
				t.Fatalf("Outcome.Decided and jobstatus.Decided disagree")
			}
			if !strings.Contains(got.Message, tc.msgHas) {
				t.Fatalf("message %q lacks %q", got.Message, tc.msgHas)
			}
			if (got.Result != nil) != tc.resultParsed {
				t.Fatalf("result %+v", got.Result)
			}
			if len(got.Message) > maxMessage {
				t.Fatalf("message of %d bytes", len(got.Message))
			}
		})
	}
}

func TestOutcomeExposesTheStateLock(t *testing.T) {
	broken := &runnerapi.LockBroken{LockID: "b1", Who: "runner@old", Pod: "old-pod", Job: "captf-0123456789abcdef-0"}
	holder := &runnerapi.LockHolder{ID: "h1", Who: "ops@laptop", Operation: "OperationTypeApply", Created: "2026-01-01T00:00:00Z"}
	ok := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, LockBroken: broken}))
	got := OutcomeOf(testJob(cond(batchv1.JobComplete, "CompletionsReached")), []corev1.Pod{testPod("a", time.Now(), 0, "", ok)})
	if got.Outcome != infrav1.RunSucceeded || got.LockBroken == nil || *got.LockBroken != *broken || got.LockHolder != nil ||
		!strings.Contains(got.Message, "broke the stale state lock b1 of pod old-pod") {
		t.Fatalf("%+v", got)
	}
	failed := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{},
		LockHolder: holder, Error: "apply exited with code 1\nError acquiring the state lock"}))
	got = OutcomeOf(testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)), []corev1.Pod{testPod("a", time.Now(), 10, "Error", failed)})
	if got.Outcome != infrav1.RunFailed || got.LockHolder == nil || *got.LockHolder != *holder ||
		!strings.Contains(got.Message, "the state is locked by ops@laptop (lock h1, OperationTypeApply, since 2026-01-01T00:00:00Z)") {
		t.Fatalf("%+v", got)
	}
}

func TestOutcomeExposesThePlan(t *testing.T) {
	sum := &runnerapi.PlanSummary{Create: 1, Update: 2, Replace: 3, Delete: 4, Addresses: []string{"terraform_data.a"}}
	saved := &runnerapi.PlanRef{ID: runnerapi.PlanID("f", "h", 1, "l"), FileSHA256: "f"}
	done := testJob(cond(batchv1.JobComplete, "CompletionsReached"))
	plan := string(runnerapi.Encode(runnerapi.Result{Operation: "Plan", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{},
		Changes: ptr.To(true), Summary: sum, SavedPlan: saved}))
	got := OutcomeOf(done, []corev1.Pod{testPod("a", time.Now(), 0, "", plan)})
	if got.Summary == nil || got.Summary.Replace != 3 || got.Summary.Addresses[0] != "terraform_data.a" || got.SavedPlan == nil || *got.SavedPlan != *saved ||
		!strings.Contains(got.Message, "1 to create, 2 to update, 3 to replace, 4 to delete") || !strings.Contains(got.Message, "saved plan "+saved.ID) {
		t.Fatalf("plan: %+v", got)
	}
	applied := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, AppliedPlan: saved}))
	got = OutcomeOf(done, []corev1.Pod{testPod("a", time.Now(), 0, "", applied)})
	if got.AppliedPlan == nil || *got.AppliedPlan != *saved || !strings.Contains(got.Message, "applied plan "+saved.ID) {
		t.Fatalf("applied: %+v", got)
	}
	failed := testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded))
	stale := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{}, PlanStale: true,
		Error: "Error: Saved plan is stale"}))
	got = OutcomeOf(failed, []corev1.Pod{testPod("a", time.Now(), runnerapi.ExitPlanRefused, "Error", stale)})
	if got.Outcome != infrav1.RunFailed || !got.PlanStale || got.AppliedPlan != nil || !strings.Contains(got.Message, "the saved plan is stale") {
		t.Fatalf("stale: %+v", got)
	}
	refused := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{},
		PlanRefused: runnerapi.PlanRefusedConsumed}))
	got = OutcomeOf(failed, []corev1.Pod{testPod("a", time.Now(), runnerapi.ExitPlanRefused, "Error", refused)})
	if got.Outcome != infrav1.RunFailed || got.PlanRefused != runnerapi.PlanRefusedConsumed || !strings.Contains(got.Message, "refused (Consumed)") {
		t.Fatalf("refused: %+v", got)
	}
	// Without a result the exit code still says a plan was refused.
	got = OutcomeOf(failed, []corev1.Pod{testPod("a", time.Now(), runnerapi.ExitPlanRefused, "Error", "")})
	if got.Outcome != infrav1.RunFailed || !strings.Contains(got.Message, "code 16 (the saved plan was refused") {
		t.Fatalf("no result: %+v", got)
	}
}

// A failed run's message gives the run's facts and the module's own error before the Job
// controller's "backoff limit" text, which comes last; without a result, that text is all there
// is and leads.
func TestOutcomeMessageGivesTheJobControllersWordLast(t *testing.T) {
	job := testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded))
	failed := testPod("a", time.Now(), runnerapi.ExitTerraformFailed, "Error", resultDoc(runnerapi.OutcomeFailed, "apply exited with code 1\nError: quota exceeded", ptr.To(true)))
	got := OutcomeOf(job, []corev1.Pod{failed})
	if want := "changes: true; apply exited with code 1\nError: quota exceeded; Job: Job " + batchv1.JobReasonBackoffLimitExceeded; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
	got = OutcomeOf(job, nil)
	if !strings.HasPrefix(got.Message, "Job "+batchv1.JobReasonBackoffLimitExceeded+"; ") {
		t.Fatalf("message without a result %q: the Job controller's word leads", got.Message)
	}
}

func TestOutcomeMessageIsBounded(t *testing.T) {
	job := testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded))
	long := strings.Repeat("é", 3000) + "END"
	got := OutcomeOf(job, []corev1.Pod{testPod("a", time.Now(), 10, "Error", resultDoc(runnerapi.OutcomeFailed, long, nil))})
	// The module's error leads, cut at its start; the Job controller's word on the end follows.
	if len(got.Message) > maxMessage || !strings.HasSuffix(got.Message, "END; Job: Job "+batchv1.JobReasonBackoffLimitExceeded) || !strings.HasPrefix(got.Message, "...") {
		t.Fatalf("message of %d bytes: %q", len(got.Message), got.Message[:10])
	}
	if !utf8.ValidString(got.Message) {
		t.Fatal("message cut inside a character")
	}
}
