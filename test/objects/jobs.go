package objects

import (
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// JobBuilder builds a Job: a valid one-container, never-restarting Job the API server accepts.
type JobBuilder struct{ obj *batchv1.Job }

// Job starts a Job with no owner: a Job of nobody until Of makes it CAPTF's.
func Job(ns, name string) *JobBuilder {
	return &JobBuilder{obj: &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "runner", Image: "runner:test"}},
			}},
		},
	}}
}

// Of makes the Job CAPTF's Job of the object of kind and name in the Cluster cluster: the
// owner labels the controller writes (naming.OwnerLabels). It adds no owner reference: Owner does.
func (b *JobBuilder) Of(kind, name, cluster string) *JobBuilder {
	for k, v := range naming.OwnerLabels(kind, name, cluster, "") {
		b.Label(k, v)
	}
	return b
}

// Owner adds a controller owner reference to o, the incarnation (UID) the Job belongs to. o's
// GroupVersionKind must be set, or o must be one of the three Terraform kinds.
func (b *JobBuilder) Owner(o client.Object) *JobBuilder {
	gvk := o.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		gvk = infrav1.GroupVersion.WithKind(KindOf(o))
	}
	b.obj.OwnerReferences = append(b.obj.OwnerReferences, *metav1.NewControllerRef(o, gvk))
	return b
}

// UID sets the Job's UID (what its pods' controller reference and a per-run Secret's owner
// reference name); for Jobs that are never created on an API server, which assigns its own.
func (b *JobBuilder) UID(uid types.UID) *JobBuilder {
	b.obj.UID = uid
	return b
}

// Label sets a label on the Job.
func (b *JobBuilder) Label(key, value string) *JobBuilder {
	if b.obj.Labels == nil {
		b.obj.Labels = map[string]string{}
	}
	b.obj.Labels[key] = value
	return b
}

// Annotation sets an annotation on the Job.
func (b *JobBuilder) Annotation(key, value string) *JobBuilder {
	if b.obj.Annotations == nil {
		b.obj.Annotations = map[string]string{}
	}
	b.obj.Annotations[key] = value
	return b
}

// Suspend makes the Job suspended: the Job controller would start no pod for it.
func (b *JobBuilder) Suspend() *JobBuilder {
	b.obj.Spec.Suspend = ptr.To(true)
	return b
}

// With lets the test change what no other method sets (the pod template, a status field).
func (b *JobBuilder) With(fn func(*batchv1.Job)) *JobBuilder {
	fn(b.obj)
	return b
}

// Deadline sets spec.activeDeadlineSeconds.
func (b *JobBuilder) Deadline(seconds int64) *JobBuilder {
	b.obj.Spec.ActiveDeadlineSeconds = ptr.To(seconds)
	return b
}

// Started records the start time and one active pod: a running Job.
func (b *JobBuilder) Started(at metav1.Time) *JobBuilder {
	b.obj.Status.StartTime = &at
	b.obj.Status.Active = 1
	return b
}

// Complete records a Job that succeeded at at: the conditions the Job controller writes.
func (b *JobBuilder) Complete(at metav1.Time) *JobBuilder {
	return b.finish(at, batchv1.JobComplete, batchv1.JobSuccessCriteriaMet)
}

// Failed records a Job that failed at at.
func (b *JobBuilder) Failed(at metav1.Time) *JobBuilder {
	return b.finish(at, batchv1.JobFailed, batchv1.JobFailureTarget)
}

func (b *JobBuilder) finish(at metav1.Time, final, target batchv1.JobConditionType) *JobBuilder {
	if b.obj.Status.StartTime == nil {
		b.obj.Status.StartTime = &at
	}
	b.obj.Status.Active = 0
	if final == batchv1.JobComplete {
		b.obj.Status.Succeeded, b.obj.Status.CompletionTime = 1, &at
	} else {
		b.obj.Status.Failed = 1
	}
	for _, t := range []batchv1.JobConditionType{target, final} {
		b.obj.Status.Conditions = append(b.obj.Status.Conditions, batchv1.JobCondition{
			Type: t, Status: corev1.ConditionTrue, LastProbeTime: at, LastTransitionTime: at})
	}
	return b
}

// Obj returns the Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.obj }

// PodBuilder builds a pod, of a Job (PodOf) or of none (Pod).
type PodBuilder struct {
	obj *corev1.Pod
	job *batchv1.Job
}

// Pod starts a pod of no Job: one never-restarting container, without a service account token.
func Pod(ns, name string) *PodBuilder {
	return &PodBuilder{obj: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "runner", Image: "runner:test"}},
		},
	}}
}

// PodOf starts the pod the Job controller would create for job: its Job labels and a copy of
// its template's spec, without a service account (tests run no token controller).
func PodOf(job *batchv1.Job, name string) *PodBuilder {
	spec := *job.Spec.Template.Spec.DeepCopy()
	spec.ServiceAccountName = ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	return &PodBuilder{job: job, obj: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: name, Labels: map[string]string{
			batchv1.JobNameLabel: job.Name, "job-name": job.Name}},
		Spec: spec,
	}}
}

// AsBuilt gives the pod its Job's pod template unchanged, service account and token mount
// included, and the template's labels: for a test where admission judges the spec as built.
// A pod of no Job stays as it is.
func (b *PodBuilder) AsBuilt() *PodBuilder {
	if b.job == nil {
		return b
	}
	b.obj.Spec = *b.job.Spec.Template.Spec.DeepCopy()
	for k, v := range b.job.Spec.Template.Labels {
		b.obj.Labels[k] = v
	}
	return b
}

// ControlledBy adds the controller owner reference the Job controller puts on the pods it
// creates (job must have its UID, as read back from the API server).
func (b *PodBuilder) ControlledBy(job *batchv1.Job) *PodBuilder {
	ref := metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	ref.BlockOwnerDeletion = nil
	b.obj.OwnerReferences = append(b.obj.OwnerReferences, *ref)
	return b
}

// JobLabel keeps only key of the two labels that name the pod's Job (batchv1.JobNameLabel, or
// the legacy "job-name"), as on a pod of a Job controller that writes only that one.
func (b *PodBuilder) JobLabel(key string) *PodBuilder {
	for _, k := range []string{batchv1.JobNameLabel, "job-name"} {
		if k != key {
			delete(b.obj.Labels, k)
		}
	}
	return b
}

// Phase sets the pod's phase.
func (b *PodBuilder) Phase(p corev1.PodPhase) *PodBuilder {
	b.obj.Status.Phase = p
	return b
}

// With lets the test change what no other method sets (container statuses, conditions, the
// spec as the template has it).
func (b *PodBuilder) With(fn func(*corev1.Pod)) *PodBuilder {
	fn(b.obj)
	return b
}

// Obj returns the pod.
func (b *PodBuilder) Obj() *corev1.Pod { return b.obj }

// LeaseBuilder builds a coordination Lease.
type LeaseBuilder struct{ obj *coordinationv1.Lease }

// Lease starts a Lease nobody holds.
func Lease(ns, name string) *LeaseBuilder {
	return &LeaseBuilder{obj: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// Holder sets the holder identity.
func (b *LeaseBuilder) Holder(id string) *LeaseBuilder {
	b.obj.Spec.HolderIdentity = ptr.To(id)
	return b
}

// Renewed sets the acquire and renew times to at and the duration to seconds.
func (b *LeaseBuilder) Renewed(at metav1.MicroTime, seconds int32) *LeaseBuilder {
	b.obj.Spec.AcquireTime, b.obj.Spec.RenewTime = &at, &at
	b.obj.Spec.LeaseDurationSeconds = ptr.To(seconds)
	return b
}

// RenewTime sets spec.renewTime alone: a lease written by hand (or forged) may carry no
// acquire time and no duration.
func (b *LeaseBuilder) RenewTime(at metav1.MicroTime) *LeaseBuilder {
	b.obj.Spec.RenewTime = &at
	return b
}

// Label sets a label on the Lease.
func (b *LeaseBuilder) Label(key, value string) *LeaseBuilder {
	if b.obj.Labels == nil {
		b.obj.Labels = map[string]string{}
	}
	b.obj.Labels[key] = value
	return b
}

// Labels sets every label of m on the Lease (a state lock's runnerapi.StateLabels).
func (b *LeaseBuilder) Labels(m map[string]string) *LeaseBuilder {
	for k, v := range m {
		b.Label(k, v)
	}
	return b
}

// Annotation sets an annotation on the Lease.
func (b *LeaseBuilder) Annotation(key, value string) *LeaseBuilder {
	if b.obj.Annotations == nil {
		b.obj.Annotations = map[string]string{}
	}
	b.obj.Annotations[key] = value
	return b
}

// With lets the test change what no other method sets.
func (b *LeaseBuilder) With(fn func(*coordinationv1.Lease)) *LeaseBuilder {
	fn(b.obj)
	return b
}

// Obj returns the Lease.
func (b *LeaseBuilder) Obj() *coordinationv1.Lease { return b.obj }

// KindOf names the Terraform kind of o ("" for any other object).
func KindOf(o client.Object) string {
	switch o.(type) {
	case *infrav1.TerraformCluster:
		return infrav1.TerraformClusterKind
	case *infrav1.TerraformMachine:
		return infrav1.TerraformMachineKind
	case *infrav1.TerraformMachinePool:
		return infrav1.TerraformMachinePoolKind
	}
	return ""
}
