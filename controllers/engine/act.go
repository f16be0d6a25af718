package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
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

	switch d.Action {
	case decide.ActionWaitJob, decide.ActionWait, decide.ActionIdle:
		p.holdEvent()
		p.pullFailureEvent()
		p.startBlockEvent()
		if d.Wait != nil {
			return ctrl.Result{RequeueAfter: d.Wait.RequeueAfter}, nil
		}
		return ctrl.Result{}, nil
	case decide.ActionDeleteJob:
		p.pullFailureEvent()
		p.startBlockEvent()
		return p.deleteNeverStartedJob(ctx)
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
		p.emit(corev1.EventTypeWarning, "AbandonVoided", why)
		p.flush()
	}

	// The marks.
	if d.SetBlockMove {
		if err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "") }); err != nil {
			res, err := p.conflictOr(ctx, err, "set block-move")
			return res, false, err
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
			res, err := p.conflictOr(ctx, err, "clear block-move")
			return res, false, err
		}
		p.emit(corev1.EventTypeNormal, "BlockMoveCleared", "nothing runs and the object is paused or leaving: clusterctl move may proceed")
		p.flush()
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
