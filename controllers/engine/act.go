package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// act carries out p.d. It writes exactly what the decision says: the marks first, then the
// action. Conditions are computed afterwards from the evidence, the decision and p.rep.
func (p *pass) act(ctx context.Context) (ctrl.Result, error) {
	d := p.d
	switch d.Action {
	case decide.ActionNone:
		return ctrl.Result{}, nil
	case decide.ActionAddFinalizer:
		if err := p.patchMeta(ctx, func(o Object) {
			controllerutil.AddFinalizer(o, infrav1.Finalizer)
			if d.SetBlockMove {
				decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "")
			}
		}); err != nil {
			return p.conflictOr(ctx, err, "add finalizer")
		}
		return ctrl.Result{}, nil
	case decide.ActionWaitLag:
		return ctrl.Result{RequeueAfter: d.Wait.RequeueAfter}, nil
	case decide.ActionBookkeep:
		if d.ClearActiveJob {
			p.obj.GetTerraformStatus().ActiveJob = nil
		}
		return p.bookkeep(ctx)
	case decide.ActionSkipRun:
		return p.skipRun(ctx, p.ev.Jobs.Current.Name)
	}

	// A void abandon goes first: nothing after it may read it as meant.
	if why := d.VoidAbandon; why != "" {
		if err := p.patchMeta(ctx, func(o Object) { decide.RemoveAnnotation(o, infrav1.AbandonInfrastructureAnnotation) }); err != nil {
			return p.conflictOr(ctx, err, "void the abandon")
		}
		log.FromContext(ctx).Info("voided a dormant abandon", "why", why)
		p.emit(corev1.EventTypeWarning, "AbandonVoided", why)
		p.flush()
	}

	// The marks.
	if d.SetBlockMove {
		if err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "") }); err != nil {
			return p.conflictOr(ctx, err, "set block-move")
		}
	}
	if name := d.SetActiveJob; name != "" {
		p.obj.GetTerraformStatus().ActiveJob = &infrav1.ActiveJob{Name: name, Operation: p.runningOp(name), StartTime: p.jobStart(name)}
	}
	if d.ClearActiveJob {
		p.obj.GetTerraformStatus().ActiveJob = nil
	}
	if d.ClearBlockMove && !d.LetsGo() {
		if err := p.patchMeta(ctx, func(o Object) { decide.RemoveAnnotation(o, infrav1.BlockMoveAnnotation) }); err != nil {
			return p.conflictOr(ctx, err, "clear block-move")
		}
		p.emit(corev1.EventTypeNormal, "BlockMoveCleared", "nothing runs and the object is paused or leaving: clusterctl move may proceed")
		p.flush()
	}

	switch d.Action {
	case decide.ActionWaitJob, decide.ActionWait, decide.ActionIdle:
		p.holdEvent()
		if d.Wait != nil {
			return ctrl.Result{RequeueAfter: d.Wait.RequeueAfter}, nil
		}
		return ctrl.Result{}, nil
	case decide.ActionRecoverStatus:
		return p.recoverFromState(ctx)
	case decide.ActionStart:
		return p.start(ctx, d.Operation)
	case decide.ActionRemoveFinalizer:
		return p.removeFinalizer(ctx, d.ClearBlockMove, "nothing runs; the object may go, and its state stays: this deletion is part of a move")
	case decide.ActionLeaveState:
		return p.removeFinalizer(ctx, d.ClearBlockMove, "nothing was destroyed: the object never wrote a state, and the state found (not adopted) is left as it is")
	case decide.ActionCleanup:
		return p.cleanup(ctx)
	case decide.ActionRetain, decide.ActionAbandon:
		return p.release(ctx, d.Action)
	}
	return ctrl.Result{}, nil
}

// skipRun moves the run sequence past a name that a Job of another incarnation holds, so the
// next Job gets a name of its own; that Job is never counted as this object's.
func (p *pass) skipRun(ctx context.Context, name string) (ctrl.Result, error) {
	if err := p.patchMeta(ctx, func(o Object) {
		decide.SetAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(p.ev.Jobs.RunSeq+1, 10))
	}); err != nil {
		return p.conflictOr(ctx, err, "move the run sequence past another incarnation's Job")
	}
	log.FromContext(ctx).Info("a Job of another incarnation holds this run's name; moving on", "job", name)
	p.rep.Skipped = name
	return ctrl.Result{}, nil
}

// release lets the object go without a destroy, handing its state, durable inputs and backups
// over to a person (Retain, or an audited abandon).
func (p *pass) release(ctx context.Context, a decide.Action) (ctrl.Result, error) {
	for _, name := range p.objectSecrets() {
		if err := p.retainSecret(ctx, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	note := "deletionPolicy Retain: nothing was destroyed; the state, durable inputs and backups are kept and no longer protected (see docs/state.md)"
	if a == decide.ActionAbandon {
		p.emit(corev1.EventTypeWarning, "InfrastructureAbandoned",
			"the infrastructure was abandoned (annotation "+infrav1.AbandonInfrastructureAnnotation+"): nothing was destroyed; the state, durable inputs and backups are kept")
		note = "abandoned: nothing was destroyed; the state, durable inputs and backups are kept"
	}
	res, err := p.removeFinalizer(ctx, true, note)
	if err == nil && res.RequeueAfter == 0 {
		p.rep.Released = true
	}
	return res, err
}

func (p *pass) runningOp(name string) infrav1.Operation {
	for _, j := range p.ev.Jobs.Running {
		if j.Name == name {
			return j.Operation
		}
	}
	return ""
}

func (p *pass) jobStart(name string) *metav1.Time {
	if j := p.jobNamed(name); j != nil {
		t := j.CreationTimestamp
		return &t
	}
	return nil
}

// start runs the Job start sequence (ARCHITECTURE.md step 8): run lease (and cluster lease) ->
// block-move and run sequence -> live pause re-read -> durable inputs -> live lease
// confirmation -> Job (AlreadyExists adopts) -> per-run Secret -> status.activeJob.
func (p *pass) start(ctx context.Context, op infrav1.Operation) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	r := p.r
	name := naming.JobName(p.suffix, p.ev.Jobs.RunSeq)
	spec := p.obj.GetTerraformSpec()
	deadline := jobs.DefaultActiveDeadlineSeconds
	if spec.Job.ActiveDeadlineSeconds != nil {
		deadline = *spec.Job.ActiveDeadlineSeconds
	}
	req := runlease.Request{Owner: p.owner, Holder: name, Operation: op, ActiveDeadlineSeconds: deadline}

	// 0. A Job slot of the manager (in memory: a wait here costs no API request).
	slot := types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}
	free, err := r.Slots.Reserve(ctx, slot, op, r.Clock.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	if !free {
		p.rep.SlotWait = true
		metrics.LeaseWaits.WithLabelValues(infrav1.WaitingForJobSlotReason).Inc()
		if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, decide.FamilyOf(op)); c == nil || c.Reason != infrav1.WaitingForJobSlotReason {
			p.emit(corev1.EventTypeNormal, infrav1.WaitingForJobSlotReason, fmt.Sprintf("%s waits for a free Job slot of the manager", op))
		}
		return ctrl.Result{RequeueAfter: SlotRequeue}, nil
	}
	keepSlot := false // the Job exists, or may: a create whose outcome is unknown keeps its slot
	defer func() {
		if !keepSlot {
			r.Slots.Release(slot)
		}
	}()

	// 1. The leases.
	res, err := r.Leases.Acquire(ctx, req)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("acquire run lease: %w", err)
	}
	if !res.Acquired {
		w := res.Wait
		p.rep.LeaseWait = &decide.LeaseWait{Condition: w.Condition, Reason: w.Reason, Message: w.Message}
		metrics.LeaseWaits.WithLabelValues(w.Reason).Inc()
		if !w.Repeats(meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, w.Condition)) {
			p.emit(corev1.EventTypeNormal, w.Reason, w.Message) // sent once the status patch records the wait
		}
		return ctrl.Result{RequeueAfter: w.RequeueAfter}, nil
	}

	// 2. block-move and the run sequence, with an optimistic lock: a pass on a stale object
	// stops here with a conflict.
	if err := p.patchMeta(ctx, func(o Object) {
		decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "")
		decide.SetAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(p.ev.Jobs.RunSeq, 10))
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
		if err := p.releaseIfNoJob(ctx, name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}

	// 4. Durable inputs (destroy reads them; they move with the object).
	contract, wait, err := r.Kind.Contract(ctx, Env{Cache: r.Client, Live: r.APIReader, ClusterName: p.owner.Cluster}, p.obj)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("gather contract inputs: %w", err)
	}
	if wait != nil && op != infrav1.OperationDestroy {
		if err := p.releaseIfNoJob(ctx, name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: wait.RequeueAfter}, nil
	}
	in, problem, err := p.inputsForRun(ctx, op, contract)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem == nil {
		if problem, err = p.runnerAccountProblem(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	if problem != nil {
		p.rep.StartProblem = problem
		return ctrl.Result{}, p.releaseIfNoJob(ctx, name)
	}
	if op != infrav1.OperationDestroy {
		if err := p.writeDurableInputs(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 5. The lease must still be ours: another manager may have taken it while we wrote.
	ours, err := r.Leases.Confirm(ctx, req)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("confirm run lease: %w", err)
	}
	if !ours {
		logger.Info("run lease no longer names our Job; not creating it", "job", name)
		return ctrl.Result{RequeueAfter: decide.LagRequeue}, nil
	}

	// The state channel's account, Role and RoleBinding, and the empty state Secret and lock
	// Lease it may read and update (it may create nothing).
	if err := p.ensureRunnerAccess(ctx); err != nil {
		return ctrl.Result{}, err
	}

	// 6. The Job. Its name is deterministic: AlreadyExists means an earlier attempt created
	// it, and we adopt it rather than make a second one.
	job, err := jobs.Build(p.jobParams(p.ev.Jobs.RunSeq, op, in.Hash))
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
			if !ownedBy(existing, p.obj.GetUID()) {
				// Another incarnation's Job has this name: never adopt it. Give back what this
				// attempt took and move the run sequence on.
				if _, err := r.Leases.Release(ctx, p.owner, name); err != nil {
					return ctrl.Result{}, fmt.Errorf("release leases of %s: %w", name, err)
				}
				return p.skipRun(ctx, name)
			}
			if jobstatus.Finished(existing) {
				// This run's Job already ended, and this pass did not see it: the cache does
				// not show it yet. It is not the Job this pass starts, so it is not reported as
				// running; its events have come and gone, so no watch brings it back: look
				// again soon, and bookkeeping counts it once the cache shows it.
				logger.Info("the Job of this run already ended but the cache does not show it; looking again", "job", name)
				p.rep.LagJob = name
				return ctrl.Result{RequeueAfter: decide.LagRequeue}, nil
			}
			logger.Info("adopting the Job an earlier attempt created", "job", name)
			job = existing
			keepSlot = true
		case rejected(err):
			p.rep.Rejected = "the API server refused the Job: " + err.Error()
			p.emit(corev1.EventTypeWarning, "JobRejected", "the API server refused Job "+name+": "+err.Error())
			if err := p.releaseIfNoJob(ctx, name); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: decide.BackoffBase}, nil
		default:
			// A timeout may hide a create that went through: keep the leases, and the slot.
			keepSlot = true
			return ctrl.Result{}, fmt.Errorf("create job %s: %w", name, err)
		}
	} else {
		keepSlot = true
		metrics.JobsStarted.WithLabelValues(p.r.Kind.Name(), string(op)).Inc()
		if pl := p.ev.Plan.Pending; op == infrav1.OperationPlan && pl != nil {
			p.emit(corev1.EventTypeNormal, "PlanSuperseded", fmt.Sprintf("plan %s no longer matches the inputs or the state (or was applied); Job %s plans again", pl.ID, name))
		}
		p.emit(corev1.EventTypeNormal, "JobStarted", fmt.Sprintf("started Job %s (%s)", name, op))
		p.flush()
	}

	// 7. The per-run Secret, owned by the Job (deleted with it); a restore carries the backup.
	var restore []byte
	if op == infrav1.OperationRestore {
		if restore, err = p.restoreState(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := p.writeRunSecret(ctx, job, in, restore); err != nil {
		return ctrl.Result{}, err
	}

	// 8. status.activeJob (reported; never load-bearing).
	st := p.obj.GetTerraformStatus()
	st.ActiveJob = &infrav1.ActiveJob{Name: name, Operation: op, StartTime: &metav1.Time{Time: r.Clock.Now()}}
	p.rep.Started = name
	return ctrl.Result{}, nil
}

// SlotRequeue is how soon an object waiting for a Job slot looks again.
const SlotRequeue = 10 * time.Second

// rejected reports errors that prove the Job was not created.
func rejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) // the namespace is gone
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

func (p *pass) removeFinalizer(ctx context.Context, clearBlockMove bool, note string) (ctrl.Result, error) {
	if err := p.patchMeta(ctx, func(o Object) {
		if clearBlockMove {
			decide.RemoveAnnotation(o, infrav1.BlockMoveAnnotation)
		}
		controllerutil.RemoveFinalizer(o, infrav1.Finalizer)
	}); err != nil {
		return p.conflictOr(ctx, err, "remove finalizer")
	}
	p.r.memo.forget(p.obj.GetUID())
	p.emit(corev1.EventTypeNormal, "FinalizerRemoved", note)
	p.flush()
	return ctrl.Result{}, nil
}

// event is one event waiting for the write it reports.
type event struct{ eventType, reason, note string }

// emit queues an event; flush sends the queue. An event is sent only after the write it
// reports succeeded: callers flush right after that write, and the queue left at the end of
// the pass goes out after the status patch succeeded (lease waits, outputs problems).
func (p *pass) emit(eventType, reason, note string) {
	p.pending = append(p.pending, event{eventType, reason, note})
}

func (p *pass) flush() {
	for _, e := range p.pending {
		if p.r.Recorder != nil {
			p.r.Recorder.Eventf(p.obj, nil, e.eventType, e.reason, e.reason, "%s", e.note)
		}
	}
	p.pending = nil
}
