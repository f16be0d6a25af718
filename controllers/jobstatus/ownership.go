package jobstatus

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// The ownership vocabulary. An object of kind and name keeps one Terraform state across its
// incarnations (deleted and created again under the same name), so two questions differ:
// whether a Job belongs to the object, any incarnation (SameObject and its two halves), and
// whether it belongs to this incarnation (SameIncarnation, by UID). A third asks whether a pod
// belongs to a Job (PodOfJob when the Job was read, PodOfJobNamed when only its name is known).

// LabelledForObject reports whether the Job carries the owner labels of kind and name
// (naming.OwnerLabels). The labels are what the cache's label scope and the label selectors
// see; alone they say nothing of the incarnation.
func LabelledForObject(job *batchv1.Job, kind, name string) bool {
	return job != nil && naming.OwnedBy(job.Labels, kind, name)
}

// ControlledByObject reports whether the Job's controller owner reference names a CAPTF object
// (API group infrav1.GroupVersion.Group) of kind and name, any incarnation of it. The Job guard
// lets only the manager and the override groups change that reference, so it survives an edit
// of the labels.
func ControlledByObject(job *batchv1.Job, kind, name string) bool {
	if job == nil || kind == "" || name == "" {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(job)
	return ref != nil && ref.Kind == kind && ref.Name == name &&
		strings.HasPrefix(ref.APIVersion, infrav1.GroupVersion.Group+"/")
}

// SameObject reports whether the Job is a Job of the object kind/name, any incarnation: it
// carries the object's owner labels or its controller owner reference names the object.
// Either suffices, so a Job whose labels were stripped while it runs stays its object's. The
// lease rules count a holder as the owner's by it.
func SameObject(job *batchv1.Job, kind, name string) bool {
	if kind == "" || name == "" {
		return false
	}
	return LabelledForObject(job, kind, name) || ControlledByObject(job, kind, name)
}

// SameIncarnation reports whether o (a Job, a backup Secret, ...) is controlled by the object
// whose UID is uid: the incarnation that made it, not an earlier object of the same name.
func SameIncarnation(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == uid
}

// PodOfJob reports whether pod belongs to job: its controller owner reference names the Job's
// UID or, for a pod without one (tests, the sandbox), a Job-name label names the Job.
func PodOfJob(pod *corev1.Pod, job *batchv1.Job) bool {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.UID == job.UID
	}
	return PodOfJobNamed(pod, job.Name)
}

// PodOfJobNamed reports whether pod carries a Job-name label (JobNameLabel or
// LegacyJobNameLabel) naming job. It is the test when only the Job's name is known, as for a
// lease's holder whose Job may be gone.
func PodOfJobNamed(pod *corev1.Pod, job string) bool {
	return pod.Labels[JobNameLabel] == job || pod.Labels[LegacyJobNameLabel] == job
}
