package jobstatus

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func jobWith(conds ...batchv1.JobConditionType) *batchv1.Job {
	j := objects.Job("ns", "j").Obj()
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// TestAllPodsTerminal: a Job's pods have all stopped exactly when NonTerminal names none of
// them (what the removed jobs.AllPodsTerminal said).
func TestAllPodsTerminal(t *testing.T) {
	job := objects.Job("ns", "j").Obj()
	pod := func(phase corev1.PodPhase) corev1.Pod { return *objects.PodOf(job, "j-a").Phase(phase).Obj() }
	cases := []struct {
		pods []corev1.Pod
		want bool
	}{
		{nil, true},
		{[]corev1.Pod{pod(corev1.PodSucceeded), pod(corev1.PodFailed)}, true},
		{[]corev1.Pod{pod(corev1.PodFailed), pod(corev1.PodRunning)}, false},
		{[]corev1.Pod{pod(corev1.PodPending)}, false},
		{[]corev1.Pod{pod(corev1.PodUnknown)}, false},
	}
	for i, tc := range cases {
		if got := len(NonTerminal(tc.pods)) == 0; got != tc.want {
			t.Errorf("case %d: got %v", i, got)
		}
	}
}

// TestFinishedSucceededDecided: the interim conditions decide a Job's outcome but do not finish
// it; only Complete succeeds.
func TestFinishedSucceededDecided(t *testing.T) {
	falseFailed := jobWith()
	falseFailed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionFalse}}
	cases := []struct {
		name                         string
		job                          *batchv1.Job
		finished, succeeded, decided bool
		success                      bool
	}{
		{"no Job", nil, false, false, false, false},
		{"no condition", jobWith(), false, false, false, false},
		{"a false condition", falseFailed, false, false, false, false},
		{"complete", objects.Job("ns", "j").Complete(metav1.Now()).Obj(), true, true, true, true},
		{"failed", objects.Job("ns", "j").Failed(metav1.Now()).Obj(), true, false, true, false},
		{"success criteria met, pods still stopping", jobWith(batchv1.JobSuccessCriteriaMet), false, false, true, true},
		{"failure target, pods still stopping", jobWith(batchv1.JobFailureTarget), false, false, true, false},
		{"suspended only", jobWith(batchv1.JobSuspended), false, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cond, success := Decided(tc.job)
			if Finished(tc.job) != tc.finished || Succeeded(tc.job) != tc.succeeded || (cond != nil) != tc.decided || success != tc.success {
				t.Fatalf("finished=%v succeeded=%v decided=%v success=%v, want %v %v %v %v", Finished(tc.job), Succeeded(tc.job),
					cond != nil, success, tc.finished, tc.succeeded, tc.decided, tc.success)
			}
		})
	}
}

func TestOwnership(t *testing.T) {
	const ns, kind, name = "ns", infrav1.TerraformMachineKind, "m1"
	this := objects.Machine(ns, name).UID("u-1").Obj()
	earlier := objects.Machine(ns, name).UID("u-0").Obj()
	other := objects.Machine(ns, "m2").UID("u-2").Obj()
	job := func() *objects.JobBuilder { return objects.Job(ns, "captf-x-1") }
	foreignGroup := job().Owner(this).Obj()
	foreignGroup.OwnerReferences[0].APIVersion = "example.com/v1"
	cases := []struct {
		name                                string
		job                                 *batchv1.Job
		labelled, controlled, same, thisOne bool
	}{
		{"labels and reference of this incarnation", job().Of(kind, name, "").Owner(this).Obj(), true, true, true, true},
		{"labels and reference of an earlier incarnation", job().Of(kind, name, "").Owner(earlier).Obj(), true, true, true, false},
		{"labels stripped, reference kept", job().Label("team", "infra").Owner(this).Obj(), false, true, true, true},
		{"labels only", job().Of(kind, name, "").Obj(), true, false, true, false},
		{"reference of another API group", foreignGroup, false, false, false, true},
		{"reference to another object", job().Owner(other).Obj(), false, false, false, false},
		{"labels of another kind", job().Of(infrav1.TerraformClusterKind, name, "").Obj(), false, false, false, false},
		{"no Job", nil, false, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := [4]bool{LabelledForObject(tc.job, kind, name), ControlledByObject(tc.job, kind, name), SameObject(tc.job, kind, name), false}
			if tc.job != nil {
				got[3] = SameIncarnation(tc.job, this.UID)
			}
			if want := [4]bool{tc.labelled, tc.controlled, tc.same, tc.thisOne}; got != want {
				t.Fatalf("labelled, controlled, same object, same incarnation = %v, want %v", got, want)
			}
		})
	}
	if labelled := job().Of(kind, name, "").Obj(); SameObject(labelled, "", name) || SameObject(labelled, kind, "") {
		t.Fatal("an owner without kind or name owns nothing")
	}
}

func TestPodOfJob(t *testing.T) {
	job := objects.Job("ns", "captf-x-1").UID("job-uid").Obj()
	earlier := objects.Job("ns", "captf-x-1").UID("earlier-job").Obj()
	legacyOnly := objects.PodOf(job, "p").Obj()
	delete(legacyOnly.Labels, JobNameLabel)
	unlabelled := objects.PodOf(job, "p").Obj()
	unlabelled.Labels = nil
	cases := []struct {
		name         string
		pod          *corev1.Pod
		ofJob, named bool
	}{
		{"controlled by the Job and labelled", objects.PodOf(job, "p").ControlledBy(job).Obj(), true, true},
		{"legacy label only, no reference", legacyOnly, true, true},
		{"labelled, controlled by an earlier Job of that name", objects.PodOf(job, "p").ControlledBy(earlier).Obj(), false, true},
		{"no label, no reference", unlabelled, false, false},
		{"label of another Job", objects.PodOf(objects.Job("ns", "captf-x-2").Obj(), "p").Obj(), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if PodOfJob(tc.pod, job) != tc.ofJob || PodOfJobNamed(tc.pod, job.Name) != tc.named {
				t.Fatalf("PodOfJob=%v PodOfJobNamed=%v, want %v %v", PodOfJob(tc.pod, job), PodOfJobNamed(tc.pod, job.Name), tc.ofJob, tc.named)
			}
		})
	}
}
