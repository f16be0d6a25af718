package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
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

	if res, proceed, err := p.writeMarks(ctx); !proceed {
		return res, err
	}
	for _, e := range decide.WaitEvents(p.ev, d, p.obj.GetTerraformStatus().Conditions) {
		p.out.add(e.Type, e.Reason, e.Message)
	}

	switch d.Action {
	case decide.ActionWaitJob, decide.ActionWait, decide.ActionIdle:
		return p.wait(ctx, d)
	case decide.ActionDeleteJob:
		return deleteNeverStartedJob(ctx, p.r.Client, p.ev.Jobs.Running[0], p.jobs, &p.out)
	case decide.ActionRecoverStatus:
		return p.recoverFromState(ctx)
	case decide.ActionBackup:
		var err error
		if p.rep.Backups, err = takeDueBackup(ctx, p.r.stateKeeper(), p.subject, p.ev.State, p.patchMeta, &p.out); err != nil {
			return p.conflictOr(ctx, err, "take the due backup")
		}
		return ctrl.Result{}, nil
	case decide.ActionImportReplica:
		return p.importReplica(ctx, d.Import)
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

// writeMarks writes what the decision does to the marks, before its action: a void abandon
// goes first (nothing after it may read it as meant), then block-move and status.activeJob.
// Block-move is cleared here only when the object stays; letting it go clears it with the
// finalizer. proceed is false when a write stopped the pass.
func (p *pass) writeMarks(ctx context.Context) (ctrl.Result, bool, error) {
	d := p.d
	if why := d.VoidAbandon; why != "" {
		if err := p.patchMeta(ctx, func(o Object) { decide.RemoveAnnotation(o, infrav1.AbandonInfrastructureAnnotation) }); err != nil {
			res, err := p.conflictOr(ctx, err, "void the abandon")
			return res, false, err
		}
		log.FromContext(ctx).Info("voided a dormant abandon", "why", why)
		p.out.add(corev1.EventTypeWarning, "AbandonVoided", why)
		p.out.flush()
	}

	// The marks.
	if d.SetBlockMove {
		if err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "") }); err != nil {
			res, err := p.conflictOr(ctx, err, "set block-move")
			return res, false, err
		}
	}
	if name := d.SetActiveJob; name != "" {
		p.obj.GetTerraformStatus().ActiveJob = activeJobOf(p.ev.Jobs.Running, p.jobs, name)
	}
	if d.ClearActiveJob {
		p.obj.GetTerraformStatus().ActiveJob = nil
	}
	if d.ClearBlockMove && !d.LetsGo() {
		if err := p.patchMeta(ctx, func(o Object) { decide.RemoveAnnotation(o, infrav1.BlockMoveAnnotation) }); err != nil {
			res, err := p.conflictOr(ctx, err, "clear block-move")
			return res, false, err
		}
		p.out.add(corev1.EventTypeNormal, "BlockMoveCleared", "nothing runs and the object is paused or leaving: clusterctl move may proceed")
		p.out.flush()
	}
	return ctrl.Result{}, true, nil
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
	for _, name := range state.Names(p.suffix, p.ev.State.Backups) {
		if err := p.r.stateKeeper().Retain(ctx, p.subject, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	note := "deletionPolicy Retain: nothing was destroyed; the state, durable inputs and backups are kept and no longer protected (see docs/state.md)"
	if a == decide.ActionAbandon {
		p.out.add(corev1.EventTypeWarning, "InfrastructureAbandoned",
			"the infrastructure was abandoned (annotation "+infrav1.AbandonInfrastructureAnnotation+"): nothing was destroyed; the state, durable inputs and backups are kept")
		note = "abandoned: nothing was destroyed; the state, durable inputs and backups are kept"
	}
	res, err := p.removeFinalizer(ctx, true, note)
	if err == nil && res.RequeueAfter == 0 {
		p.rep.Released = true
	}
	return res, err
}

// activeJobOf is status.activeJob for the running Job name: its operation as the decision saw
// it, and its creation time from the cache (nil when the cache does not show it yet).
func activeJobOf(running []decide.JobView, jobs []batchv1.Job, name string) *infrav1.ActiveJob {
	a := &infrav1.ActiveJob{Name: name}
	for _, j := range running {
		if j.Name == name {
			a.Operation = j.Operation
			break
		}
	}
	if j := jobNamed(jobs, name); j != nil {
		t := j.CreationTimestamp
		a.StartTime = &t
	}
	return a
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
func releaseIfNoJob(ctx context.Context, leases *runlease.Manager, owner runlease.Owner, name string) error {
	if _, _, err := leases.ReleaseIfNoJob(ctx, owner, name); err != nil {
		return fmt.Errorf("release leases of %s: %w", name, err)
	}
	return nil
}

// livePaused applies decide.Paused to the object (read into fresh) and its Cluster as the API
// server has them now: the cache may lag a pause set a moment ago.
func livePaused(ctx context.Context, live client.Reader, key types.NamespacedName, fresh Object, cluster string) (bool, error) {
	if err := live.Get(ctx, key, fresh); err != nil {
		return false, fmt.Errorf("re-read object: %w", err)
	}
	if decide.Paused(fresh.GetAnnotations(), nil) || cluster == "" {
		return decide.Paused(fresh.GetAnnotations(), nil), nil
	}
	c := &clusterv1.Cluster{}
	if err := live.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: cluster}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("re-read cluster: %w", err)
	}
	return decide.Paused(fresh.GetAnnotations(), c.Spec.Paused), nil
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
	p.out.add(corev1.EventTypeNormal, "FinalizerRemoved", note)
	p.out.flush()
	return ctrl.Result{}, nil
}

// event is one event waiting for the write it reports.
type event struct{ eventType, reason, note string }

// outbox holds the events of one pass until the write they report succeeded: callers flush
// right after that write, and the queue left at the end of the pass goes out after the status
// patch succeeded (lease waits, outputs problems); a write that failed drops the queue.
type outbox struct {
	rec     events.EventRecorder // nil sends nothing
	about   runtime.Object
	pending []event
}

// add queues an event.
func (o *outbox) add(eventType, reason, note string) {
	o.pending = append(o.pending, event{eventType, reason, note})
}

// flush sends the queue.
func (o *outbox) flush() {
	for _, e := range o.pending {
		if o.rec != nil {
			o.rec.Eventf(o.about, nil, e.eventType, e.reason, e.reason, "%s", e.note)
		}
	}
	o.pending = nil
}

// drop forgets the queue: nothing it reports was written.
func (o *outbox) drop() { o.pending = nil }

// importReplica brings a version back from the replica store as a backup of the object and
// asks for its restore (captf.io/restore-state, the request a person would write): the
// restore then runs as a Job, like every restore, and its success records the lineage as the
// object's own. A version the store cannot give back holds the object with the reason (the
// next pass looks again).
func (p *pass) importReplica(ctx context.Context, v *decide.ReplicaVersionView) (ctrl.Result, error) {
	b, err := p.r.stateKeeper().ImportReplica(ctx, p.subject, *v)
	if err != nil {
		log.FromContext(ctx).Error(err, "bring the state back from the replica store", "lineage", v.Lineage, "serial", v.Serial)
		p.rep.StateProblem = &decide.Problem{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.ReplicaUnavailableReason,
			Message: fmt.Sprintf("the state of lineage %s at serial %d could not be brought back from the replica store: %v; the next pass tries again", v.Lineage, v.Serial, err)}
		return ctrl.Result{RequeueAfter: ReplicaRetry}, nil
	}
	serial := strconv.FormatInt(b.Serial, 10)
	if err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.RestoreStateAnnotation, serial) }); err != nil {
		return p.conflictOr(ctx, err, "ask for the restore of the replica's state")
	}
	p.out.add(corev1.EventTypeNormal, infrav1.ReplicaImportedReason, fmt.Sprintf(
		"state lineage %s serial %d (written by object UID %s) brought back from the replica store as backup %s; its restore follows (%s=%s)",
		v.Lineage, v.Serial, v.UID, b.Name, infrav1.RestoreStateAnnotation, serial))
	p.out.flush()
	return ctrl.Result{}, nil
}

// wait ends a pass that starts nothing: a running Job's pass copies a state version the run
// wrote to the replica store, and an idle pass (a drift check's schedule may bring it back)
// catches the replica up.
func (p *pass) wait(ctx context.Context, d decide.Decision) (ctrl.Result, error) {
	var res ctrl.Result
	if d.Wait != nil {
		res = ctrl.Result{RequeueAfter: d.Wait.RequeueAfter}
	}
	switch d.Action {
	case decide.ActionWaitJob:
		return res, p.replicateWhileRunning(ctx)
	case decide.ActionIdle:
		caught, err := p.catchUpReplica(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		return earliest(res, caught), nil
	}
	return res, nil
}
