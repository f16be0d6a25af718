package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// act carries out a decision.
func (p *pass) act(ctx context.Context, d Decision) (ctrl.Result, error) {
	if d.ClearActiveJob {
		p.obj.GetTerraformStatus().ActiveJob = nil
	}
	if d.Problem != nil {
		p.setCondition(d.Problem.ConditionType, metav1.ConditionFalse, d.Problem.Reason, d.Problem.Message)
	} else if !p.ev.Deleting && !p.ev.Paused && p.ev.DependencyWait == nil {
		p.setCondition(infrav1.InputsValidCondition, metav1.ConditionTrue, "InputsAssembled", "")
	}
	if p.ev.DependencyWait == nil && !p.ev.Deleting && !p.ev.Paused {
		p.setCondition(infrav1.DependenciesReadyCondition, metav1.ConditionTrue, "DependenciesReady", "")
	}
	if d.SetBlockMove {
		if err := p.patchMeta(ctx, func(o Object) { setAnnotation(o, infrav1.BlockMoveAnnotation, "") }); err != nil {
			return p.conflictOr(ctx, err, "set block-move")
		}
	}
	if d.ClearBlockMove && d.Action != ActionCleanupAndRemoveFinalizer && d.Action != ActionRemoveFinalizer {
		if err := p.patchMeta(ctx, func(o Object) { removeAnnotation(o, infrav1.BlockMoveAnnotation) }); err != nil {
			return p.conflictOr(ctx, err, "clear block-move")
		}
		p.event(corev1.EventTypeNormal, "BlockMoveCleared", "nothing runs and the object is paused or leaving: clusterctl move may proceed")
	}

	switch d.Action {
	case ActionIdle:
		if !p.obj.GetTerraformStatus().IsProvisioned() && p.ev.AppliedHash != "" {
			// Status was lost (a move drops it): rebuild it from the state, without a Job.
			return ctrl.Result{}, p.recoverFromState(ctx)
		}
		return ctrl.Result{}, nil
	case ActionWait, ActionWaitLag:
		if w := d.Wait; w != nil {
			if w.ConditionType != "" {
				status := metav1.ConditionFalse
				if w.ConditionType == infrav1.PausedCondition {
					status = metav1.ConditionTrue
				}
				if w.ConditionType == infrav1.DeletionBlockedCondition {
					status = metav1.ConditionTrue
					p.setCondition(infrav1.DeletingCondition, metav1.ConditionTrue, w.Reason, w.Message)
				}
				p.setCondition(w.ConditionType, status, w.Reason, w.Message)
			}
			return ctrl.Result{RequeueAfter: w.RequeueAfter}, nil
		}
		return ctrl.Result{}, nil
	case ActionStart:
		return p.start(ctx, d.Operation)
	case ActionRemoveFinalizer:
		return p.removeFinalizer(ctx, d.ClearBlockMove, "nothing runs; the object may go, and its state stays: this deletion is part of a move")
	case ActionCleanupAndRemoveFinalizer:
		return p.cleanup(ctx)
	}
	return ctrl.Result{}, nil
}

// start runs the Job start sequence (ARCHITECTURE.md step 8): run lease (and cluster lease) ->
// block-move and run sequence -> live pause re-read -> durable inputs -> live lease
// confirmation -> Job (AlreadyExists adopts) -> per-run Secret -> status.activeJob.
func (p *pass) start(ctx context.Context, op infrav1.Operation) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	r := p.r
	name := naming.JobName(p.suffix, p.ev.RunSeq)
	spec := p.obj.GetTerraformSpec()
	deadline := int64(3600)
	if spec.Job.ActiveDeadlineSeconds != nil {
		deadline = *spec.Job.ActiveDeadlineSeconds
	}

	// 1. The leases.
	res, err := r.Leases.Acquire(ctx, runlease.Request{Owner: p.owner, Holder: name, Operation: op, ActiveDeadlineSeconds: deadline})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("acquire run lease: %w", err)
	}
	if !res.Acquired {
		w := res.Wait
		if !w.Repeats(meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, w.Condition)) {
			p.event(corev1.EventTypeNormal, w.Reason, w.Message)
		}
		p.setCondition(w.Condition, metav1.ConditionUnknown, w.Reason, w.Message)
		return ctrl.Result{RequeueAfter: w.RequeueAfter}, nil
	}

	// 2. block-move and the run sequence, with an optimistic lock: a pass on a stale object
	// stops here with a conflict.
	if err := p.patchMeta(ctx, func(o Object) {
		setAnnotation(o, infrav1.BlockMoveAnnotation, "")
		setAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(p.ev.RunSeq, 10))
	}); err != nil {
		return p.conflictOr(ctx, err, "write block-move before the Job")
	}

	// 3. Pause, read live: a move may have paused the Cluster a moment ago.
	paused, err := p.livePaused(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if paused {
		logger.Info("paused while starting; giving the lease back", "job", name)
		return ctrl.Result{Requeue: true}, p.releaseIfNoJob(ctx, name)
	}

	// 4. Durable inputs (destroy reads them; they move with the object).
	contract, wait, err := r.Kind.Contract(ctx, Env{Cache: r.Client, Live: r.APIReader, ClusterName: p.owner.Cluster}, p.obj)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("gather contract inputs: %w", err)
	}
	if wait != nil && op != infrav1.OperationDestroy {
		return ctrl.Result{RequeueAfter: wait.RequeueAfter}, p.releaseIfNoJob(ctx, name)
	}
	in, problem, err := p.inputsForRun(ctx, op, contract)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != nil {
		p.setCondition(problem.ConditionType, metav1.ConditionFalse, problem.Reason, problem.Message)
		return ctrl.Result{}, p.releaseIfNoJob(ctx, name)
	}
	if op != infrav1.OperationDestroy {
		if err := p.writeDurableInputs(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 5. The lease must still be ours: another manager may have taken it while we wrote.
	ours, err := r.Leases.Confirm(ctx, runlease.Request{Owner: p.owner, Holder: name, Operation: op, ActiveDeadlineSeconds: deadline})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("confirm run lease: %w", err)
	}
	if !ours {
		logger.Info("run lease no longer names our Job; not creating it", "job", name)
		return ctrl.Result{RequeueAfter: LagRequeue}, nil
	}

	if r.ManageRunnerRBAC && spec.Job.ServiceAccountName == "" {
		if err := ensureRunnerRBAC(ctx, r.Client, r.APIReader, p.obj.GetNamespace(), r.Jobs.ServiceAccountName); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 6. The Job. Its name is deterministic: AlreadyExists means an earlier attempt created
	// it, and we adopt it rather than make a second one.
	job, err := jobs.Build(p.jobParams(p.ev.RunSeq, op, in.Hash))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("build job: %w", err)
	}
	if err := r.Client.Create(ctx, job); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			existing := &batchv1.Job{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), existing); err != nil {
				return ctrl.Result{}, fmt.Errorf("adopt existing job %s: %w", name, err)
			}
			logger.Info("adopting the Job an earlier attempt created", "job", name)
			job = existing
		case rejected(err):
			p.setCondition(familyOf(op), metav1.ConditionFalse, infrav1.JobFailedReason, "the API server refused the Job: "+err.Error())
			p.event(corev1.EventTypeWarning, "JobRejected", "the API server refused Job "+name+": "+err.Error())
			return ctrl.Result{RequeueAfter: BackoffBase}, p.releaseIfNoJob(ctx, name)
		default:
			// A timeout may hide a create that went through: keep the leases.
			return ctrl.Result{}, fmt.Errorf("create job %s: %w", name, err)
		}
	} else {
		p.event(corev1.EventTypeNormal, "JobStarted", fmt.Sprintf("started Job %s (%s)", name, op))
	}

	// 7. The per-run Secret, owned by the Job (deleted with it).
	if err := p.writeRunSecret(ctx, job, in); err != nil {
		return ctrl.Result{}, err
	}

	// 8. status.activeJob (reported; never load-bearing).
	st := p.obj.GetTerraformStatus()
	st.ActiveJob = &infrav1.ActiveJob{Name: name, Operation: op, StartTime: &metav1.Time{Time: r.Clock.Now()}}
	p.setCondition(familyOf(op), metav1.ConditionUnknown, infrav1.JobRunningReason, fmt.Sprintf("Job %s runs %s", name, op))
	if p.ev.Deleting {
		p.setCondition(infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.DestroyingReason, "destroy Job "+name+" runs")
	}
	return ctrl.Result{}, nil
}

// rejected reports errors that prove the Job was not created.
func rejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err) ||
		(apierrors.IsNotFound(err)) // the namespace is gone
}

// releaseIfNoJob gives the leases back only when the API server has no Job of that name: a
// pass with a lagging cache can rebuild the name of a Job an earlier pass created.
func (p *pass) releaseIfNoJob(ctx context.Context, name string) error {
	if _, _, err := p.r.Leases.ReleaseIfNoJob(ctx, p.owner, name); err != nil {
		return fmt.Errorf("release leases of %s: %w", name, err)
	}
	return nil
}

func (p *pass) livePaused(ctx context.Context) (bool, error) {
	fresh := p.r.Kind.New()
	if err := p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(p.obj), fresh); err != nil {
		return false, fmt.Errorf("re-read object: %w", err)
	}
	if hasKey(fresh.GetAnnotations(), infrav1.PausedAnnotation) {
		return true, nil
	}
	if p.owner.Cluster == "" {
		return false, nil
	}
	c := &clusterv1.Cluster{}
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: p.owner.Cluster}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("re-read cluster: %w", err)
	}
	return c.Spec.Paused != nil && *c.Spec.Paused, nil
}

// bookkeep counts the finished Job of the current run sequence once: outcome -> conditions,
// outputs -> contract fields, durable markers, then per-run Secret and leases. It returns false
// when the Job's pods still run (the Job is not over until they are).
func (p *pass) bookkeep(ctx context.Context) (bool, error) {
	r, cur := p.r, p.ev.Current
	var job *batchv1.Job
	for i := range p.jobs {
		if p.jobs[i].Name == cur.Name {
			job = &p.jobs[i]
		}
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return false, fmt.Errorf("list pods of job %s: %w", job.Name, err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			// I2/I3: the Job is finished but a pod still runs; keep everything and look again.
			p.ev.Running = append(p.ev.Running, *cur)
			_, err := p.keepRunning(ctx)
			p.result = ctrl.Result{RequeueAfter: 10 * time.Second}
			return false, err
		}
	}
	out := jobs.OutcomeOf(job, pods.Items)
	now := r.Clock.Now()
	st := p.obj.GetTerraformStatus()
	st.LastRun = &infrav1.LastRun{Job: job.Name, Operation: cur.Operation, Outcome: out.Outcome,
		FinishedAt: &metav1.Time{Time: now}, Message: out.Message}
	if st.ActiveJob != nil && st.ActiveJob.Name == job.Name {
		st.ActiveJob = nil
	}
	family := familyOf(cur.Operation)

	var outputsErr error
	var outputs *state.State
	mutate := func(o Object) {
		setAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(cur.Seq+1, 10))
	}
	if out.Outcome == infrav1.RunSucceeded {
		p.setCondition(family, metav1.ConditionTrue, infrav1.JobSucceededReason, fmt.Sprintf("Job %s succeeded", job.Name))
		p.event(corev1.EventTypeNormal, "JobSucceeded", fmt.Sprintf("Job %s (%s) succeeded", job.Name, cur.Operation))
		if cur.Operation == infrav1.OperationApply {
			var err error
			outputs, outputsErr, err = p.readOutputs(ctx)
			if err != nil {
				return false, err
			}
			if err := p.labelStateForMove(ctx); err != nil {
				return false, err
			}
		}
		prev := mutate
		mutate = func(o Object) {
			prev(o)
			removeAnnotation(o, FailuresAnnotation)
			removeAnnotation(o, RetryAtAnnotation)
			removeAnnotation(o, LastErrorAnnotation)
			switch cur.Operation {
			case infrav1.OperationApply:
				setAnnotation(o, AppliedHashAnnotation, cur.InputsHash)
				if outputsErr == nil && outputs != nil {
					outputsErr = r.Kind.ApplyOutputs(o, outputs)
				}
			case infrav1.OperationDestroy:
				setAnnotation(o, DestroyedAnnotation, "true")
			}
		}
	} else {
		failures, _ := strconv.Atoi(p.obj.GetAnnotations()[FailuresAnnotation])
		failures++
		wait := backoff(failures)
		retry := now.Add(wait)
		p.setCondition(family, metav1.ConditionFalse, infrav1.JobFailedReason,
			fmt.Sprintf("Job %s %s: %s (retry in %s)", job.Name, lower(string(out.Outcome)), out.Message, wait))
		p.event(corev1.EventTypeWarning, "JobFailed", fmt.Sprintf("Job %s (%s) %s: %s", job.Name, cur.Operation, lower(string(out.Outcome)), out.Message))
		prev := mutate
		mutate = func(o Object) {
			prev(o)
			setAnnotation(o, FailuresAnnotation, strconv.Itoa(failures))
			setAnnotation(o, LastErrorAnnotation, truncate(fmt.Sprintf("Job %s %s: %s", job.Name, lower(string(out.Outcome)), out.Message), 1024))
			setAnnotation(o, RetryAtAnnotation, retry.UTC().Format(time.RFC3339))
		}
	}
	if err := p.patchMeta(ctx, mutate); err != nil {
		_, err = p.conflictOr(ctx, err, "record finished job")
		return false, err
	}
	if cur.Operation == infrav1.OperationApply && out.Outcome == infrav1.RunSucceeded {
		if outputsErr == nil && outputs != nil {
			outputsErr = p.writeOutputsSecret(ctx, outputs)
		}
		p.recordOutputs(outputsErr)
	}

	// Counted: the per-run Secret and the leases go.
	rs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: naming.RunSecretName(job.Name)}}
	if err := r.Client.Delete(ctx, rs); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "delete per-run secret", "secret", rs.Name)
	}
	if _, err := r.Leases.Release(ctx, p.owner, job.Name); err != nil {
		log.FromContext(ctx).Error(err, "release leases of a finished job", "job", job.Name)
	}
	return true, nil
}

func (p *pass) recordOutputs(outputsErr error) {
	var oe *state.OutputError
	switch {
	case outputsErr == nil:
		p.setCondition(infrav1.OutputsValidCondition, metav1.ConditionTrue, "OutputsValid", "")
		st := p.obj.GetTerraformStatus()
		t := true
		st.Initialization = &infrav1.Initialization{Provisioned: &t}
	case errors.As(outputsErr, &oe):
		p.setCondition(infrav1.OutputsValidCondition, metav1.ConditionFalse, oe.Reason, oe.Message)
		p.event(corev1.EventTypeWarning, oe.Reason, oe.Message)
	default:
		p.setCondition(infrav1.OutputsValidCondition, metav1.ConditionFalse, infrav1.OutputInvalidReason, outputsErr.Error())
	}
}

func backoff(failures int) time.Duration {
	d := BackoffBase
	for i := 1; i < failures && d < BackoffMax; i++ {
		d *= 2
	}
	if d > BackoffMax {
		d = BackoffMax
	}
	return d
}

func (p *pass) removeFinalizer(ctx context.Context, clearBlockMove bool, note string) (ctrl.Result, error) {
	if err := p.patchMeta(ctx, func(o Object) {
		if clearBlockMove {
			removeAnnotation(o, infrav1.BlockMoveAnnotation)
		}
		controllerutil.RemoveFinalizer(o, infrav1.Finalizer)
	}); err != nil {
		return p.conflictOr(ctx, err, "remove finalizer")
	}
	p.r.memo.forget(p.obj.GetUID())
	p.event(corev1.EventTypeNormal, "FinalizerRemoved", note)
	return ctrl.Result{}, nil
}

// cleanup runs after a successful destroy (or when no state was ever written): state Secret,
// durable inputs, outputs and every lease the object owns go, then the finalizer.
func (p *pass) cleanup(ctx context.Context) (ctrl.Result, error) {
	// Leases first: a live one means a Job of the object runs or may still be created, and
	// then nothing may be deleted yet.
	kept, err := p.r.Leases.Cleanup(ctx, p.owner)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("release leases: %w", err)
	}
	if len(kept) > 0 {
		log.FromContext(ctx).Info("a live lease holds the cleanup back", "leases", kept)
		return ctrl.Result{RequeueAfter: LagRequeue}, nil
	}
	// I6: the state goes only when the destroy left nothing behind.
	st, err := state.Read(ctx, p.r.APIReader, p.obj.GetNamespace(), p.suffix)
	switch {
	case errors.Is(err, state.ErrNoState):
	case err != nil:
		p.setCondition(infrav1.DeletingCondition, metav1.ConditionFalse, infrav1.DestroyingReason,
			"the state cannot be read, so it is kept: "+err.Error())
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case !state.StateEmpty(st):
		msg := "the destroy succeeded but the state still lists resources; the state is kept. Inspect it, then remove the annotation " +
			DestroyedAnnotation + " to destroy again"
		p.setCondition(infrav1.DeletingCondition, metav1.ConditionFalse, infrav1.DestroyingReason, msg)
		p.event(corev1.EventTypeWarning, "StateNotEmpty", msg)
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	ns := p.obj.GetNamespace()
	for _, name := range []string{naming.StateSecretName(p.suffix), naming.InputsSecretName(p.suffix), naming.OutputsSecretName(p.suffix)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := p.r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", name, err)
		}
	}
	if err := p.deleteUnheldStateLock(ctx); err != nil {
		return ctrl.Result{}, err
	}
	p.setCondition(infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.DestroyingReason, "destroyed; state, inputs and leases deleted")
	res, err := p.removeFinalizer(ctx, true, "destroyed; state, inputs and leases deleted")
	if err == nil && p.r.ManageRunnerRBAC {
		if err := p.removeRunnerRBACIfLast(ctx); err != nil {
			log.FromContext(ctx).Error(err, "remove the runner's account; it is recreated or removed by the next cleanup")
		}
	}
	return res, err
}

func (p *pass) event(eventType, reason, note string) {
	if p.r.Recorder == nil {
		return
	}
	p.r.Recorder.Eventf(p.obj, nil, eventType, reason, reason, "%s", note)
}

func lower(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}

// readOutputs reads the state live after an apply. A state that is missing or unreadable is
// an outputs problem (reported), not an error to retry blindly.
func (p *pass) readOutputs(ctx context.Context) (*state.State, error, error) {
	st, err := state.Read(ctx, p.r.APIReader, p.obj.GetNamespace(), p.suffix)
	switch {
	case err == nil:
		return st, nil, nil
	case errors.Is(err, state.ErrNoState):
		return nil, &state.OutputError{Reason: infrav1.OutputMissingReason,
			Message: "the apply succeeded but left no state Secret " + naming.StateSecretName(p.suffix)}, nil
	}
	if se, ok := state.AsStateError(err); ok {
		return nil, &state.OutputError{Reason: infrav1.OutputInvalidReason, Message: se.Error()}, nil
	}
	return nil, nil, fmt.Errorf("read state: %w", err)
}

// recoverFromState rebuilds the contract fields and provisioned from the state of the last
// successful apply, for an object whose status was wiped.
func (p *pass) recoverFromState(ctx context.Context) error {
	st, outputsErr, err := p.readOutputs(ctx)
	if err != nil {
		return err
	}
	if outputsErr == nil {
		if err := p.patchMeta(ctx, func(o Object) { outputsErr = p.r.Kind.ApplyOutputs(o, st) }); err != nil {
			_, err = p.conflictOr(ctx, err, "restore contract fields")
			return err
		}
	}
	p.recordOutputs(outputsErr)
	if outputsErr == nil {
		p.setCondition(infrav1.ApplyJobSucceededCondition, metav1.ConditionTrue, infrav1.JobSucceededReason,
			"recovered from the state of the last successful apply")
		p.event(corev1.EventTypeNormal, "StatusRecovered", "status rebuilt from the Terraform state; no Job was needed")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// removeRunnerRBACIfLast removes the runner's ServiceAccount, Role and RoleBinding when this
// object was the namespace's last CAPTF object (read from the cache). A Job of this object has
// ended by now; an object created meanwhile recreates them before its first Job.
func (p *pass) removeRunnerRBACIfLast(ctx context.Context) error {
	ns := p.obj.GetNamespace()
	lists := []client.ObjectList{&infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}}
	for _, l := range lists {
		if err := p.r.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list remaining objects: %w", err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return fmt.Errorf("list remaining objects: %w", err)
		}
		for _, it := range items {
			if o, ok := it.(client.Object); ok && o.GetUID() != p.obj.GetUID() {
				return nil
			}
		}
	}
	return RemoveRunnerRBAC(ctx, p.r.Client, ns, p.r.Jobs.ServiceAccountName)
}

// writeOutputsSecret offers every module output to users in a Secret owned by the object
// (naming.OutputsSecretName): sensitive outputs go there and nowhere else (never status or
// events). A module whose outputs do not fit a Secret gets an outputs problem.
func (p *pass) writeOutputsSecret(ctx context.Context, st *state.State) error {
	gvk, err := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := state.OutputsSecret(p.obj, gvk, p.suffix, st)
	if err != nil {
		if _, ok := state.AsOutputError(err); ok {
			return err
		}
		return fmt.Errorf("build outputs secret: %w", err)
	}
	have := &corev1.Secret{}
	err = p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := p.r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			log.FromContext(ctx).Error(err, "create outputs secret")
		}
		return nil
	case err != nil:
		log.FromContext(ctx).Error(err, "read outputs secret")
		return nil
	}
	have.Data, have.Labels, have.OwnerReferences = want.Data, want.Labels, want.OwnerReferences
	if err := p.r.Client.Update(ctx, have); err != nil {
		log.FromContext(ctx).Error(err, "update outputs secret")
	}
	return nil
}

// deleteUnheldStateLock deletes the Terraform backend's lock Lease once the state is gone, but
// only when no terraform holds it (no holder), with UID and resourceVersion preconditions so a
// lock taken meanwhile stays. A held lock is left alone: it is terraform's, and only its owner
// or a force-unlock may release it.
func (p *pass) deleteUnheldStateLock(ctx context.Context) error {
	l := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.StateLockLeaseName(p.suffix)}
	if err := p.r.APIReader.Get(ctx, key, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read state lock %s: %w", key.Name, err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		log.FromContext(ctx).Info("the state lock is held; leaving it", "lease", key.Name, "holder", *l.Spec.HolderIdentity)
		return nil
	}
	pre := client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}
	if err := p.r.Client.Delete(ctx, l, pre); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete state lock %s: %w", key.Name, err)
	}
	return nil
}
