package executor

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// Condition messages and reasons the Job controller writes.
const (
	reasonBackoffLimit = "BackoffLimitExceeded"
	msgBackoffLimit    = "Job has reached the specified backoff limit"
	msgDeadline        = "Job was active longer than specified deadline"
	reasonCompletions  = "CompletionsReached"
	msgCompletions     = "Reached expected number of succeeded pods"
)

// jobController plays the Job controller and the garbage collector for managed Jobs.
type jobController struct{ e *Executor }

func (e *Executor) setupJobController(mgr manager.Manager) error {
	skip := true
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox-jobs").
		For(&batchv1.Job{}).
		Owns(&corev1.Pod{}, builder.MatchEveryOwner).
		WithOptions(controllerOptions(&skip))
	// The garbage collector's trigger: when a CAPTF object goes, its Jobs are looked at again.
	onDelete := builder.WithPredicates(predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	})
	for _, o := range []client.Object{&infrav1.TerraformCluster{}, &infrav1.TerraformMachine{}, &infrav1.TerraformMachinePool{}} {
		b = b.Watches(o, handler.EnqueueRequestsFromMapFunc(e.jobsOwnedBy), onDelete)
	}
	err := b.Complete(&jobController{e: e})
	if err != nil {
		return fmt.Errorf("set up sandbox job controller: %w", err)
	}
	return nil
}

// Reconcile moves one Job along: create its Pod, mirror the Pod into the Job's status, end it
// on its deadline, and clean up after a deletion or when its owner is gone.
func (r *jobController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	e := r.e
	job := &batchv1.Job{}
	if err := e.client.Get(ctx, req.NamespacedName, job); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get job: %w", err)
		}
		// Gone from the cache: confirm with the API server before collecting.
		err := e.apiReader.Get(ctx, req.NamespacedName, job)
		switch {
		case err == nil:
			return ctrl.Result{RequeueAfter: time.Second}, nil
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("get job: %w", err)
		}
		return ctrl.Result{}, e.collectDeletedJob(ctx, req.NamespacedName)
	}
	if job.DeletionTimestamp != nil {
		return ctrl.Result{}, e.collectDeletingJob(ctx, job)
	}
	gone, err := e.ownerGone(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if gone {
		log.FromContext(ctx).Info("owner is gone; deleting the Job (garbage collection)")
		err := e.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if isTrue(job, batchv1.JobComplete) || isTrue(job, batchv1.JobFailed) {
		return ctrl.Result{}, nil
	}
	pods, err := e.podsOf(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if c := condition(job, batchv1.JobFailureTarget); c != nil {
		return ctrl.Result{}, e.finishFailing(ctx, job, pods, c.Reason, c.Message)
	}
	if len(pods) == 0 {
		// The cache may not hold a Pod created a moment ago: ask the API server before
		// creating a second one or declaring the first one lost.
		var live corev1.PodList
		if err := e.apiReader.List(ctx, &live, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list pods of job %s: %w", job.Name, err)
		}
		for i := range live.Items {
			if ref := metav1.GetControllerOf(&live.Items[i]); ref != nil && ref.UID == job.UID {
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
		}
		if job.Status.StartTime == nil {
			return e.startJob(ctx, job)
		}
		// The Pod went away without reporting an end: the container was lost.
		return ctrl.Result{}, e.failJob(ctx, job, reasonBackoffLimit, msgBackoffLimit)
	}
	pod := &pods[0]
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return ctrl.Result{}, e.completeJob(ctx, job)
	case corev1.PodFailed:
		return ctrl.Result{}, e.failJob(ctx, job, reasonBackoffLimit, msgBackoffLimit)
	}
	if d := job.Spec.ActiveDeadlineSeconds; d != nil && job.Status.StartTime != nil {
		left := time.Until(job.Status.StartTime.Add(time.Duration(*d) * time.Second))
		if left <= 0 {
			log.FromContext(ctx).Info("active deadline exceeded; stopping the pod", "deadlineSeconds", *d)
			return ctrl.Result{}, e.failJob(ctx, job, batchv1.JobReasonDeadlineExceeded, msgDeadline)
		}
		return ctrl.Result{RequeueAfter: left}, e.syncCounts(ctx, job, pods)
	}
	return ctrl.Result{}, e.syncCounts(ctx, job, pods)
}

// jobsOwnedBy maps a CAPTF object to its Jobs (by the owner labels CAPTF puts on them).
func (e *Executor) jobsOwnedBy(ctx context.Context, o client.Object) []reconcile.Request {
	gvk, err := e.client.GroupVersionKindFor(o)
	if err != nil {
		return nil
	}
	var list batchv1.JobList
	if err := e.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{
		infrav1.OwnerKindLabel: gvk.Kind, infrav1.OwnerNameLabel: naming.LabelValue(o.GetName()),
	}); err != nil {
		log.FromContext(ctx).Error(err, "list jobs of a deleted object")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// startJob creates the Job's only Pod, bound to the sandbox node, and records the start.
func (e *Executor) startJob(ctx context.Context, job *batchv1.Job) (ctrl.Result, error) {
	tmpl := job.Spec.Template
	lbls := map[string]string{}
	for k, v := range tmpl.Labels {
		lbls[k] = v
	}
	lbls[batchv1.JobNameLabel] = job.Name
	lbls[batchv1.ControllerUidLabel] = string(job.UID)
	lbls["job-name"] = job.Name
	lbls["controller-uid"] = string(job.UID)
	ann := map[string]string{}
	for k, v := range tmpl.Annotations {
		ann[k] = v
	}
	name := job.Name + "-" + randomSuffix()
	ann[LogAnnotation] = e.podDir(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: name}}) + "/" + logFileName
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace, Labels: lbls, Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = e.opts.NodeName
	if err := e.client.Create(ctx, pod); err != nil {
		return ctrl.Result{}, fmt.Errorf("create pod of job %s: %w", job.Name, err)
	}
	log.FromContext(ctx).Info("created pod", "pod", pod.Name)
	err := e.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		if s.StartTime == nil {
			now := metav1.Now()
			s.StartTime = &now
		}
		s.Active = 1
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if d := job.Spec.ActiveDeadlineSeconds; d != nil {
		return ctrl.Result{RequeueAfter: time.Duration(*d) * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// syncCounts keeps active, ready and terminating in step with the Pod.
func (e *Executor) syncCounts(ctx context.Context, job *batchv1.Job, pods []corev1.Pod) error {
	var active, ready, terminating int32
	for i := range pods {
		p := &pods[i]
		if terminal(p) {
			continue
		}
		if p.DeletionTimestamp != nil {
			terminating++
			continue
		}
		active++
		if p.Status.Phase == corev1.PodRunning {
			ready++
		}
	}
	st := job.Status
	if st.StartTime != nil && st.Active == active && ptr.Deref(st.Ready, 0) == ready && ptr.Deref(st.Terminating, 0) == terminating {
		return nil
	}
	return e.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		if s.StartTime == nil {
			// The write that records the start was lost after the Pod was created.
			now := metav1.Now()
			s.StartTime = &now
		}
		s.Active, s.Ready, s.Terminating = active, ptr.To(ready), ptr.To(terminating)
	})
}

// completeJob records success once the Pod succeeded.
func (e *Executor) completeJob(ctx context.Context, job *batchv1.Job) error {
	log.FromContext(ctx).Info("job complete")
	return e.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		if s.StartTime == nil {
			s.StartTime = &now
		}
		s.Active, s.Ready, s.Terminating, s.Succeeded = 0, ptr.To[int32](0), ptr.To[int32](0), 1
		s.CompletionTime = &now
		setCondition(s, batchv1.JobSuccessCriteriaMet, reasonCompletions, msgCompletions, now)
		setCondition(s, batchv1.JobComplete, reasonCompletions, msgCompletions, now)
	})
}

// failJob sets FailureTarget and stops the Pod; finishFailing sets Failed once it stopped.
func (e *Executor) failJob(ctx context.Context, job *batchv1.Job, reason, msg string) error {
	if err := e.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		setCondition(s, batchv1.JobFailureTarget, reason, msg, metav1.Now())
	}); err != nil {
		return err
	}
	pods, err := e.podsOf(ctx, job)
	if err != nil {
		return err
	}
	return e.finishFailing(ctx, job, pods, reason, msg)
}

func (e *Executor) finishFailing(ctx context.Context, job *batchv1.Job, pods []corev1.Pod, reason, msg string) error {
	running := false
	for i := range pods {
		p := &pods[i]
		if terminal(p) {
			continue
		}
		running = true
		if p.DeletionTimestamp == nil {
			// The Job controller deletes the active Pods of a failed Job; the node stops them.
			if err := e.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete pod %s: %w", p.Name, err)
			}
		}
	}
	if running {
		return e.syncCounts(ctx, job, pods)
	}
	log.FromContext(ctx).Info("job failed", "reason", reason)
	return e.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		if s.StartTime == nil {
			s.StartTime = &now
		}
		s.Active, s.Ready, s.Terminating, s.Failed = 0, ptr.To[int32](0), ptr.To[int32](0), 1
		setCondition(s, batchv1.JobFailureTarget, reason, msg, now)
		setCondition(s, batchv1.JobFailed, reason, msg, now)
	})
}

// collectDeletingJob is the garbage collector's part for a Job with a deletion timestamp, by
// the propagation policy of its deletion, which the API server recorded as a finalizer:
//   - orphan (propagationPolicy Orphan, and the batch/v1 default when a client names none):
//     the Job's Pods and per-run Secret lose their owner reference to the Job and stay; a
//     running Pod keeps running until it ends by itself. Then the finalizer goes.
//   - foregroundDeletion: the Pods and the per-run Secret are deleted (the node stops the
//     containers: SIGTERM, SIGKILL after the grace); the finalizer goes once no Pod is left.
//   - neither (background, held by another finalizer): the dependents go once the Job is gone.
func (e *Executor) collectDeletingJob(ctx context.Context, job *batchv1.Job) error {
	switch {
	case controllerutil.ContainsFinalizer(job, metav1.FinalizerOrphanDependents):
		if err := e.orphanDependents(ctx, job); err != nil {
			return err
		}
		return e.dropFinalizer(ctx, job, metav1.FinalizerOrphanDependents)
	case controllerutil.ContainsFinalizer(job, metav1.FinalizerDeleteDependents):
		left, err := e.deleteDependents(ctx, job.Namespace, job.Name, func(ref metav1.OwnerReference) bool { return ref.UID == job.UID })
		if err != nil || left > 0 {
			return err
		}
		return e.dropFinalizer(ctx, job, metav1.FinalizerDeleteDependents)
	}
	return nil
}

func (e *Executor) dropFinalizer(ctx context.Context, job *batchv1.Job, finalizer string) error {
	patch := client.MergeFrom(job.DeepCopy())
	controllerutil.RemoveFinalizer(job, finalizer)
	if err := e.client.Patch(ctx, job, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer %s from job %s: %w", finalizer, job.Name, err)
	}
	return nil
}

// orphanDependents removes the Job's owner reference from its Pods and its per-run Secret.
func (e *Executor) orphanDependents(ctx context.Context, job *batchv1.Job) error {
	var pods corev1.PodList
	if err := e.apiReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return fmt.Errorf("list pods of job %s: %w", job.Name, err)
	}
	var deps []client.Object
	for i := range pods.Items {
		deps = append(deps, &pods.Items[i])
	}
	s := &corev1.Secret{}
	err := e.apiReader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: naming.RunSecretName(job.Name)}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get per-run secret: %w", err)
	}
	if err == nil {
		deps = append(deps, s)
	}
	for _, d := range deps {
		refs := d.GetOwnerReferences()
		kept := make([]metav1.OwnerReference, 0, len(refs))
		for _, ref := range refs {
			if ref.UID != job.UID {
				kept = append(kept, ref)
			}
		}
		if len(kept) == len(refs) {
			continue
		}
		patch := client.MergeFromWithOptions(d.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		d.SetOwnerReferences(kept)
		if err := e.client.Patch(ctx, d, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("orphan %s of job %s: %w", d.GetName(), job.Name, err)
		}
		log.FromContext(ctx).Info("job deleted with propagation Orphan: its dependent stays", "dependent", fmt.Sprintf("%T %s", d, d.GetName()))
	}
	return nil
}

// collectDeletedJob is the garbage collector's part once a Job is gone: its Pods and per-run
// Secret that still point at it (an owner reference to a Job of that name that no longer
// exists) are deleted. Dependents it orphaned have no such reference and stay.
func (e *Executor) collectDeletedJob(ctx context.Context, key types.NamespacedName) error {
	live := &batchv1.Job{}
	err := e.apiReader.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return fmt.Errorf("get job: %w", err)
	}
	dangling := func(ref metav1.OwnerReference) bool { return live == nil || ref.UID != live.UID }
	_, err = e.deleteDependents(ctx, key.Namespace, key.Name, dangling)
	return err
}

// deleteDependents deletes the Pods (labelled with the Job's name) and the per-run Secret
// whose owner reference to Job name matches owned, and returns how many such Pods are left
// (being deleted or not).
func (e *Executor) deleteDependents(ctx context.Context, namespace, name string, owned func(metav1.OwnerReference) bool) (int, error) {
	ownedBy := func(o client.Object) bool {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == "Job" && ref.Name == name && owned(ref) {
				return true
			}
		}
		return false
	}
	var pods corev1.PodList
	if err := e.apiReader.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		return 0, fmt.Errorf("list pods of job %s: %w", name, err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !ownedBy(p) {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		log.FromContext(ctx).Info("deleting pod of a deleted job", "pod", p.Name)
		if err := e.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
	}
	s := &corev1.Secret{}
	err := e.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: naming.RunSecretName(name)}, s)
	if apierrors.IsNotFound(err) {
		return left, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get per-run secret: %w", err)
	}
	if ownedBy(s) && s.DeletionTimestamp == nil {
		log.FromContext(ctx).Info("deleting per-run secret of a deleted job", "secret", s.Name)
		if err := e.client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete per-run secret %s: %w", s.Name, err)
		}
	}
	return left, nil
}

// ownerGone reports whether the Job's controller owner no longer exists (read live).
func (e *Executor) ownerGone(ctx context.Context, job *batchv1.Job) (bool, error) {
	ref := metav1.GetControllerOf(job)
	if ref == nil {
		return false, nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ref.APIVersion)
	u.SetKind(ref.Kind)
	err := e.apiReader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get owner %s %s: %w", ref.Kind, ref.Name, err)
	}
	return u.GetUID() != ref.UID, nil
}

// podsOf lists the Job's Pods from the cache, newest first.
func (e *Executor) podsOf(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := e.client.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("list pods of job %s: %w", job.Name, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job.UID {
			out = append(out, p)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j-1].CreationTimestamp.Before(&out[j].CreationTimestamp); j-- {
			out[j-1], out[j] = out[j], out[j-1]
		}
	}
	return out, nil
}

// updateJobStatus applies mutate to a fresh copy of the Job's status and writes it.
func (e *Executor) updateJobStatus(ctx context.Context, job *batchv1.Job, mutate func(*batchv1.JobStatus)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &batchv1.Job{}
		if err := e.apiReader.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
			return err
		}
		if fresh.UID != job.UID {
			return apierrors.NewNotFound(batchv1.Resource("jobs"), job.Name)
		}
		mutate(&fresh.Status)
		return e.client.Status().Update(ctx, fresh)
	})
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("update status of job %s: %w", job.Name, err))
	}
	return nil
}

func setCondition(s *batchv1.JobStatus, t batchv1.JobConditionType, reason, msg string, now metav1.Time) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != corev1.ConditionTrue {
				s.Conditions[i] = batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now}
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now})
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func isTrue(job *batchv1.Job, t batchv1.JobConditionType) bool { return condition(job, t) != nil }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// randomSuffix is the 5-character suffix the Job controller gives its Pods' names.
func randomSuffix() string { return randomString(5) }

// randomString is n characters of the alphabet the API server uses for generated names.
func randomString(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
