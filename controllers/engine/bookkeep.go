package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// bookkept is what counting a finished Job concluded; the status setters report it.
type bookkept struct {
	job string
	op  infrav1.Operation
	// refreshOnly: the Job ran a refresh-only plan (reported on DriftJobSucceeded).
	refreshOnly bool
	outcome     infrav1.RunOutcome
	message     string
	// failures is the consecutive failure count after this Job (0 after a success), and
	// backoff the wait before a retry; counts is false for outcomes that never count toward
	// the backoff (a success, a fenced run).
	failures int
	backoff  time.Duration
	counts   bool
	at       time.Time
	// driftFound: a drift check found drift; actOnDrift: the object's mode acts on it
	// (Remediate: an apply follows; Accept: a refresh follows).
	driftFound bool
	actOnDrift bool
	// refreshRequest is the captf.io/refresh value the Job answered (recorded on the Job).
	refreshRequest string
	// driftSummary says what changed (counts and addresses), when the runner reported it.
	driftSummary string
	// plan is the plan a successful plan Job stored; appliedPlan the plan ID an apply Job ran.
	plan        *infrav1.PlanRecord
	appliedPlan string
}

// outputsResult is the outcome of reading the module's outputs (nil err: valid).
type outputsResult struct{ err error }

// judgeFinished is the pure part of bookkeeping: what a finished Job means for the object's
// durable markers, given the failures counted so far.
func judgeFinished(cur JobView, out jobs.Outcome, failuresBefore int, now time.Time) bookkept {
	b := bookkept{job: cur.Name, op: cur.Operation, refreshOnly: cur.RefreshOnly, outcome: out.Outcome, message: out.Message, at: now}
	switch {
	case out.Outcome == infrav1.RunSucceeded:
	case out.PlanStale || out.PlanRefused != "":
		// The saved plan no longer fits the state (or was refused before terraform ran):
		// nothing was applied, and a new plan follows. Not a failure of the module.
		b.failures = failuresBefore
	case out.Outcome == infrav1.RunFenced, out.Outcome == infrav1.RunInterrupted:
		// Fenced: another run owns the state now, this one wrote nothing. Interrupted: a
		// deletion, an eviction or the deadline stopped it. Neither is a failure of the
		// module, and neither counts toward the backoff.
		b.failures = failuresBefore
	case cur.Operation == infrav1.OperationRestore, cur.Operation.Background():
		// A failed restore is recorded against its serial (never retried); a failed drift
		// check waits for the next one. Neither delays applies and destroys.
		b.failures = failuresBefore
	default:
		b.counts = true
		b.failures = failuresBefore + 1
		b.backoff = backoff(b.failures)
	}
	return b
}

// markers writes a bookkept Job's durable markers onto the object: the next run sequence, and
// the applied hash, destroyed flag, restore outcome or failure backoff.
func (b bookkept) markers(o Object, cur JobView, restoreSerial string) {
	setAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(cur.Seq+1, 10))
	if cur.Operation.Background() {
		setAnnotation(o, infrav1.LastDriftCheckAnnotation, b.at.UTC().Format(time.RFC3339))
		if b.driftFound && b.actOnDrift {
			setAnnotation(o, infrav1.RemediateAnnotation, cur.Name)
		}
	}
	if (cur.Operation == infrav1.OperationApply || cur.Operation == infrav1.OperationRefresh) && b.outcome == infrav1.RunSucceeded {
		// An apply remediated the drift found, a refresh accepted it.
		removeAnnotation(o, infrav1.RemediateAnnotation)
	}
	if cur.Operation == infrav1.OperationRefresh && b.outcome == infrav1.RunSucceeded {
		b.answerRefresh(o)
	}
	if pl := b.plan; pl != nil {
		switch {
		case pl.Changes():
			setAnnotation(o, infrav1.PendingPlanAnnotation, pl.Annotation())
		case pl.RefreshOnly:
			// Nothing changed outside Terraform: the refresh has nothing to record.
			removeAnnotation(o, infrav1.PendingPlanAnnotation)
			removeAnnotation(o, infrav1.RemediateAnnotation)
			b.answerRefresh(o)
		default:
			// Nothing to apply: the inputs are in effect already.
			setAnnotation(o, infrav1.AppliedHashAnnotation, pl.InputsHash)
			removeAnnotation(o, infrav1.PendingPlanAnnotation)
			removeAnnotation(o, infrav1.RemediateAnnotation)
		}
	}
	if b.appliedPlan != "" && b.outcome != infrav1.RunFenced {
		// At most once (I9): whatever happened, this plan is spent.
		setAnnotation(o, infrav1.AppliedPlanAnnotation, b.appliedPlan)
		removeAnnotation(o, infrav1.PendingPlanAnnotation)
		removeAnnotation(o, infrav1.ApprovePlanAnnotation)
	}
	if cur.Operation == infrav1.OperationRestore {
		if b.outcome == infrav1.RunSucceeded {
			removeAnnotation(o, infrav1.RestoreStateAnnotation)
			removeAnnotation(o, infrav1.RestoreFailedAnnotation)
		} else if b.outcome != infrav1.RunFenced && restoreSerial != "" {
			setAnnotation(o, infrav1.RestoreFailedAnnotation, restoreSerial)
		}
	}
	switch {
	case b.outcome == infrav1.RunSucceeded:
		removeAnnotation(o, infrav1.FailuresAnnotation)
		removeAnnotation(o, infrav1.RetryAtAnnotation)
		removeAnnotation(o, infrav1.LastErrorAnnotation)
		switch cur.Operation {
		case infrav1.OperationApply:
			setAnnotation(o, infrav1.AppliedHashAnnotation, cur.InputsHash)
		case infrav1.OperationDestroy:
			setAnnotation(o, infrav1.DestroyedAnnotation, "true")
		}
	case b.counts:
		setAnnotation(o, infrav1.FailuresAnnotation, strconv.Itoa(b.failures))
		setAnnotation(o, infrav1.LastErrorAnnotation, truncate(b.summary(), 1024))
		setAnnotation(o, infrav1.RetryAtAnnotation, b.at.Add(b.backoff).UTC().Format(time.RFC3339))
	}
}

// refreshSummary says what a refresh recorded, when its runner reported it.
func refreshSummary(out jobs.Outcome) string {
	if out.Summary == nil {
		return "the approved refresh-only plan"
	}
	return out.Message
}

// answerRefresh removes the refresh request the Job answered; a request whose value changed
// since the Job was created is a new one, and stays.
func (b bookkept) answerRefresh(o Object) {
	if v, ok := o.GetAnnotations()[infrav1.RefreshAnnotation]; ok && v == b.refreshRequest {
		removeAnnotation(o, infrav1.RefreshAnnotation)
	}
}

// summary is the one-line account of a Job that did not succeed.
func (b bookkept) summary() string {
	return fmt.Sprintf("Job %s %s: %s", b.job, lower(string(b.outcome)), b.message)
}

// bookkeep counts the finished Job of the current run sequence once. Everything that can fail
// and must not be lost (reading the outputs, the state's move label, the outputs Secret)
// happens before the one metadata patch that counts the Job, so an error retries the whole
// bookkeeping on the next pass; after the patch only best-effort releases remain.
func (p *pass) bookkeep(ctx context.Context) (ctrl.Result, error) {
	cur := *p.ev.Jobs.Current
	job := p.jobNamed(cur.Name)
	if job == nil {
		return ctrl.Result{}, fmt.Errorf("bookkeep job %s: not in the cached list", cur.Name)
	}
	out := jobs.OutcomeOf(job, p.pods)
	failures, _ := strconv.Atoi(p.obj.GetAnnotations()[infrav1.FailuresAnnotation])
	b := judgeFinished(cur, out, failures, p.r.Clock.Now())
	if cur.Operation.Background() && b.outcome == infrav1.RunSucceeded && out.Result != nil && out.Result.Drift != nil {
		b.driftFound = *out.Result.Drift
		b.actOnDrift = p.ev.Drift.Mode == infrav1.DriftModeRemediate || p.ev.Drift.Mode == infrav1.DriftModeAccept
		b.driftSummary = driftSummary(out)
		p.rep.drift = &driftFinding{found: b.driftFound, summary: b.driftSummary}
	}

	// A Job that may have moved the state: protect it and back it up, whatever the outcome (a
	// failed apply can have written part of its changes).
	var backup *BackupView
	if cur.Operation.Mutating() {
		if err := p.protectState(ctx); err != nil {
			return ctrl.Result{}, err
		}
		var err error
		if backup, err = p.takeBackup(ctx, cur.Name); err != nil {
			return ctrl.Result{}, err
		}
	}

	b.appliedPlan = job.Annotations[infrav1.PlanIDAnnotation]
	b.refreshRequest = job.Annotations[infrav1.RefreshAnnotation]
	if cur.Operation == infrav1.OperationPlan && b.outcome == infrav1.RunSucceeded {
		pl, err := p.readPlan(ctx, cur)
		if err != nil {
			return ctrl.Result{}, err
		}
		b.plan = pl
	}

	var outputs *state.State
	var outputsErr error
	if cur.Operation == infrav1.OperationApply && b.outcome == infrav1.RunSucceeded {
		var err error
		if outputs, outputsErr, err = p.readOutputs(ctx); err != nil {
			return ctrl.Result{}, err
		}
		if outputsErr == nil {
			// Check the contract on a copy first: the outputs Secret is offered only for
			// outputs that fit it.
			outputsErr = p.r.Kind.ApplyOutputs(p.obj.DeepCopyObject().(Object), outputs)
		}
		if outputsErr == nil {
			if err := p.writeOutputsSecret(ctx, outputs); err != nil {
				if _, ok := state.AsOutputError(err); !ok {
					return ctrl.Result{}, err
				}
				outputsErr = err
			}
		}
	}

	// The lineage of the state the Job left: the object's own the first time, else compared
	// with it (I7: a state of another lineage holds the object).
	lineage, err := p.lineageAfter(ctx, cur.Operation)
	if err != nil {
		return ctrl.Result{}, err
	}

	// Count it: one optimistic-locked metadata patch moves the run sequence on.
	if err := p.patchMeta(ctx, func(o Object) {
		b.markers(o, cur, p.ev.State.RestoreSerial)
		recordLineage(o, p.ev.State.OwnLineage, lineage)
		if outputs != nil && outputsErr == nil {
			outputsErr = p.r.Kind.ApplyOutputs(o, outputs)
		}
	}); err != nil {
		return p.conflictOr(ctx, err, "record finished job")
	}
	if b.outcome == infrav1.RunSucceeded {
		p.emit(corev1.EventTypeNormal, "JobSucceeded", fmt.Sprintf("Job %s (%s) succeeded", b.job, b.op))
		if cur.Operation == infrav1.OperationRefresh {
			p.emit(corev1.EventTypeNormal, "StateRefreshed", fmt.Sprintf("Job %s recorded in the state what changed outside Terraform (%s); no infrastructure was changed",
				b.job, refreshSummary(out)))
		}
	} else {
		p.emit(corev1.EventTypeWarning, "JobFailed", fmt.Sprintf("Job %s (%s) %s: %s", b.job, b.op, lower(string(b.outcome)), b.message))
	}
	if outputs != nil || outputsErr != nil {
		p.rep.outputs = &outputsResult{err: outputsErr}
		var oe *state.OutputError
		if errors.As(outputsErr, &oe) {
			p.emit(corev1.EventTypeWarning, oe.Reason, oe.Message)
		}
	}
	metrics.JobsFinished.WithLabelValues(p.r.Kind.Name(), string(b.op), string(b.outcome)).Inc()
	if start := job.Status.StartTime; start != nil {
		metrics.JobDuration.WithLabelValues(string(b.op)).Observe(b.at.Sub(start.Time).Seconds())
	}
	if b.driftFound {
		metrics.DriftDetected.WithLabelValues(p.r.Kind.Name()).Inc()
	}
	if lb := out.LockBroken; lb != nil {
		metrics.LocksBroken.WithLabelValues(p.r.Kind.Name()).Inc()
		p.emit(corev1.EventTypeWarning, "StateLockBroken", fmt.Sprintf(
			"Job %s broke the stale state lock %s held by pod %s of Job %s (%s), which had ended without releasing it", b.job, lb.LockID, lb.Pod, lb.Job, lb.Who))
	}
	p.rep.lockHolder = out.LockHolder
	if pl := b.plan; pl != nil && pl.Changes() {
		p.emit(corev1.EventTypeNormal, "PlanSaved", fmt.Sprintf("Job %s saved plan %s (%s); it applies once approved: kubectl annotate %s %s %s=%s",
			b.job, pl.ID, pl.Counts(), strings.ToLower(p.r.Kind.Name()), p.obj.GetName(), infrav1.ApprovePlanAnnotation, pl.ID))
	}
	if backup != nil {
		p.emit(corev1.EventTypeNormal, "StateBackedUp", fmt.Sprintf("state serial %d backed up to %s", backup.Serial, backup.Name))
		p.rep.backups = p.pruneBackups(ctx, append([]BackupView{*backup}, p.ev.State.Backups...))
	}
	p.flush()
	p.rep.bookkept = &b
	st := p.obj.GetTerraformStatus()
	st.LastRun = &infrav1.LastRun{Job: b.job, Operation: b.op, Outcome: b.outcome,
		FinishedAt: &metav1.Time{Time: b.at}, Message: b.message}
	if cur.Operation.Background() {
		st.LastDriftCheck = &metav1.Time{Time: b.at}
		if b.driftFound {
			p.emit(corev1.EventTypeWarning, "DriftDetected", fmt.Sprintf("Job %s found drift: %s", b.job, b.driftSummary))
			p.flush()
		}
	}

	p.releaseFinished(ctx, job)
	p.pruneHistory(ctx, cur)
	return ctrl.Result{}, nil
}

// releaseFinished deletes the per-run Secret and gives back the leases of a counted Job. Both
// are best effort: the Secret goes with its Job, and a lease whose holder finished is free.
func (p *pass) releaseFinished(ctx context.Context, job *batchv1.Job) {
	rs := &corev1.Secret{}
	rs.Namespace, rs.Name = job.Namespace, naming.RunSecretName(job.Name)
	if err := p.r.Client.Delete(ctx, rs); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "delete per-run secret", "secret", rs.Name)
	}
	if _, err := p.r.Leases.Release(ctx, p.owner, job.Name); err != nil {
		log.FromContext(ctx).Error(err, "release leases of a finished job", "job", job.Name)
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
func (p *pass) recoverFromState(ctx context.Context) (ctrl.Result, error) {
	st, outputsErr, err := p.readOutputs(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if outputsErr == nil {
		if err := p.patchMeta(ctx, func(o Object) { outputsErr = p.r.Kind.ApplyOutputs(o, st) }); err != nil {
			return p.conflictOr(ctx, err, "restore contract fields")
		}
	}
	p.rep.outputs = &outputsResult{err: outputsErr}
	var oe *state.OutputError
	switch {
	case outputsErr == nil:
		p.rep.recovered = true
		p.emit(corev1.EventTypeNormal, "StatusRecovered", "status rebuilt from the Terraform state; no Job was needed")
	case errors.As(outputsErr, &oe):
		p.emit(corev1.EventTypeWarning, oe.Reason, oe.Message)
	}
	p.flush()
	return ctrl.Result{}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
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

// driftSummary is the one-line account of what a drift check found.
func driftSummary(out jobs.Outcome) string {
	return out.Message
}
