package jobstatus

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

func jobWith(conds ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// TestAllPodsTerminal: a Job's pods have all stopped exactly when NonTerminal names none of
// them (what the removed jobs.AllPodsTerminal said).
func TestAllPodsTerminal(t *testing.T) {
	pod := func(phase corev1.PodPhase) corev1.Pod { return corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
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
		{"complete", jobWith(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete), true, true, true, true},
		{"failed", jobWith(batchv1.JobFailureTarget, batchv1.JobFailed), true, false, true, false},
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
	const kind, name = infrav1.TerraformMachineKind, "m1"
	ref := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: k8stypes.UID("u-" + uid), Controller: ptr.To(true)}}
	}
	captf := infrav1.GroupVersion.String()
	job := func(labels map[string]string, refs []metav1.OwnerReference) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "captf-x-1", UID: "job-uid", Labels: labels, OwnerReferences: refs}}
	}
	own := naming.OwnerLabels(kind, name, "")
	cases := []struct {
		name                                string
		job                                 *batchv1.Job
		labelled, controlled, same, thisOne bool
	}{
		{"labels and reference of this incarnation", job(own, ref(captf, kind, name, "1")), true, true, true, true},
		{"labels and reference of an earlier incarnation", job(own, ref(captf, kind, name, "0")), true, true, true, false},
		{"labels stripped, reference kept", job(map[string]string{"team": "infra"}, ref(captf, kind, name, "1")), false, true, true, true},
		{"labels only", job(own, nil), true, false, true, false},
		{"reference of another API group", job(nil, ref("example.com/v1", kind, name, "1")), false, false, false, true},
		{"reference to another object", job(nil, ref(captf, kind, "m2", "2")), false, false, false, false},
		{"labels of another kind", job(naming.OwnerLabels(infrav1.TerraformClusterKind, name, ""), nil), false, false, false, false},
		{"no Job", nil, false, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := [4]bool{LabelledForObject(tc.job, kind, name), ControlledByObject(tc.job, kind, name), SameObject(tc.job, kind, name), false}
			if tc.job != nil {
				got[3] = SameIncarnation(tc.job, "u-1")
			}
			if want := [4]bool{tc.labelled, tc.controlled, tc.same, tc.thisOne}; got != want {
				t.Fatalf("labelled, controlled, same object, same incarnation = %v, want %v", got, want)
			}
		})
	}
	if SameObject(job(own, nil), "", name) || SameObject(job(own, nil), kind, "") {
		t.Fatal("an owner without kind or name owns nothing")
	}
}

func TestPodOfJob(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "captf-x-1", UID: "job-uid"}}
	pod := func(labels map[string]string, uid string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels}}
		if uid != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "captf-x-1", UID: k8stypes.UID(uid), Controller: ptr.To(true)}}
		}
		return p
	}
	cases := []struct {
		name         string
		pod          *corev1.Pod
		ofJob, named bool
	}{
		{"controlled by the Job and labelled", pod(map[string]string{JobNameLabel: "captf-x-1"}, "job-uid"), true, true},
		{"legacy label only, no reference", pod(map[string]string{LegacyJobNameLabel: "captf-x-1"}, ""), true, true},
		{"labelled, controlled by another Job of that name", pod(map[string]string{JobNameLabel: "captf-x-1"}, "earlier-job"), false, true},
		{"no label, no reference", pod(nil, ""), false, false},
		{"label of another Job", pod(map[string]string{JobNameLabel: "captf-x-2"}, ""), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if PodOfJob(tc.pod, job) != tc.ofJob || PodOfJobNamed(tc.pod, job.Name) != tc.named {
				t.Fatalf("PodOfJob=%v PodOfJobNamed=%v, want %v %v", PodOfJob(tc.pod, job), PodOfJobNamed(tc.pod, job.Name), tc.ofJob, tc.named)
			}
		})
	}
}
