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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// refreshSummary says what a refresh recorded, when its runner reported it.
func refreshSummary(out jobs.Outcome) string {
	if out.Summary == nil {
		return "the approved refresh-only plan"
	}
	return out.Message
}

// finishedRun is what bookkeeping collected about the finished Job of the current run
// sequence before it counts it.
type finishedRun struct {
	cur decide.JobView
	job *batchv1.Job
	out jobs.Outcome
	b   decide.Bookkept
	// backup is the state backup taken after a Job that may have moved the state.
	backup *decide.BackupView
	// replica is the replication of the state that Job left (nil: no replica, or no state).
	replica *decide.ReplicaResult
	// outputs and outputsErr are the module's outputs after an apply, and what is wrong with
	// them; lineage is the lineage of the state the Job left.
	outputs    *state.State
	outputsErr error
	lineage    string
}

// bookkeep counts the finished Job of the current run sequence once, in four steps: collect
// (everything that can fail and must not be lost: the state's protection and backup, the plan,
// the outputs and the outputs Secret, the lineage), count (the one metadata patch that moves
// the run sequence on), report (events, metrics, status.lastRun) and release (best effort: the
// per-run Secret, the leases, the Job history). An error before the count retries the whole
// bookkeeping on the next pass.
func (p *pass) bookkeep(ctx context.Context) (ctrl.Result, error) {
	f, err := p.collectFinished(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Count it: one optimistic-locked metadata patch moves the run sequence on.
	if err := p.patchMeta(ctx, func(o Object) {
		f.b.Markers(o, f.cur, p.ev.State.RestoreSerial)
		decide.RecordLineage(o, p.ev.State.OwnLineage, f.lineage)
		if f.outputs != nil && f.outputsErr == nil {
			f.outputsErr = p.r.Kind.ApplyOutputs(o, f.outputs)
		}
	}); err != nil {
		return p.conflictOr(ctx, err, "record finished job")
	}
	p.rep.DriftRecord = infrav1.ParseDriftRecord(p.obj.GetAnnotations()[infrav1.DriftFindingAnnotation])
	if f.b.HealthSampled {
		p.rep.HealthRecord = infrav1.ParseHealthRecord(p.obj.GetAnnotations()[infrav1.HealthRecordAnnotation])
		if et, reason, note, ok := decide.HealthTransition(p.ev.Health.Last, p.rep.HealthRecord, p.ev.Health.Threshold); ok {
			p.out.add(et, reason, note)
		}
	}
	p.reportFinished(ctx, f)
	releaseFinished(ctx, p.r.Client, p.r.Leases, p.owner, f.job)
	pruneHistory(ctx, p.r.Client, p.r.APIReader, p.subject, p.jobs, p.obj.GetTerraformSpec().Job, f.cur)
	return ctrl.Result{}, nil
}

// collectFinished judges the finished Job and reads and writes everything its count depends on.
func (p *pass) collectFinished(ctx context.Context) (*finishedRun, error) {
	cur := *p.ev.Jobs.Current
	job := jobNamed(p.jobs, cur.Name)
	if job == nil {
		return nil, fmt.Errorf("bookkeep job %s: not in the cached list", cur.Name)
	}
	out := jobs.OutcomeOf(job, p.pods)
	failures, _ := strconv.Atoi(p.obj.GetAnnotations()[infrav1.FailuresAnnotation])
	b := decide.JudgeFinished(cur, decide.RunEnd{Outcome: out.Outcome, Message: out.Message, PlanStale: out.PlanStale, PlanRefused: out.PlanRefused}, failures, p.r.Clock.Now())
	_, sampled := p.obj.(infrav1.HealthReporter)
	b.JudgeCheck(cur, out.Result, p.ev.Drift.Mode, sampled)
	f := &finishedRun{cur: cur, job: job, out: out}

	// A Job that may have moved the state: protect it and back it up, whatever the outcome (a
	// failed apply can have written part of its changes); while paused, the backup waits.
	if cur.Operation.Mutating() {
		if err := p.r.stateKeeper().Protect(ctx, p.subject); err != nil {
			return nil, err
		}
		if !decide.BacksUpNow(p.ev) {
			b.BackupDue = true
		} else {
			var err error
			if f.backup, err = p.r.stateKeeper().Backup(ctx, p.subject, cur.Name, p.ev.State.Backups); err != nil {
				return nil, err
			}
		}
		// The replica lives outside the cluster, so a pause (a clusterctl move) does not defer
		// it; a count that runs again writes the same version again, a no-op.
		var err error
		if f.replica, err = p.r.stateKeeper().Replicate(ctx, p.subject, p.replicatedWhileRunning()); err != nil {
			return nil, err
		}
		p.r.replicatedRV.Delete(p.obj.GetUID()) // the next run's start notes its own
	}

	b.AppliedPlan = job.Annotations[infrav1.PlanIDAnnotation]
	b.RefreshRequest = job.Annotations[infrav1.RefreshAnnotation]
	b.DriftCheckRequest = job.Annotations[infrav1.DriftCheckAnnotation]
	if cur.Operation == infrav1.OperationPlan && b.Outcome == infrav1.RunSucceeded {
		// The digests that bind the plan's artifacts come only from a pod the Job controls that
		// runs the Job's template, which the cache strips: the Job is read live for it.
		tmpl, err := liveJob(ctx, p.r.APIReader, job)
		if err != nil {
			return nil, err
		}
		reader := planReader{live: p.r.APIReader, subject: p.subject, applyPolicy: p.ev.Plan.ApplyPolicy, policies: p.policies, clock: p.r.Clock}
		pl, err := reader.read(ctx, cur, jobs.OutcomeOf(job, controlledPods(tmpl, p.pods)))
		if err != nil {
			return nil, err
		}
		b.Plan = pl
	}
	f.b = b
	if cur.Operation == infrav1.OperationApply && b.Outcome == infrav1.RunSucceeded {
		if err := p.collectOutputs(ctx, f); err != nil {
			return nil, err
		}
		if sampled && f.outputs != nil {
			// The apply's state holds the outputs: a health sample.
			f.b.HealthSampled, f.b.Health = true, state.MachineHealth(f.outputs)
		}
	}

	// The lineage of the state the Job left: the object's own the first time, else compared
	// with it (I7: a state of another lineage holds the object).
	var err error
	if f.lineage, err = lineageAfter(ctx, p.r.stateKeeper(), p.subject, cur.Operation); err != nil {
		return nil, err
	}
	return f, nil
}

// collectOutputs reads the module's outputs after a successful apply, writes the inventory of
// the state and offers the outputs Secret for outputs that fit the contract.
func (p *pass) collectOutputs(ctx context.Context, f *finishedRun) error {
	var err error
	if f.outputs, f.outputsErr, err = p.r.stateKeeper().ReadOutputs(ctx, p.subject); err != nil {
		return err
	}
	// The inventory lists what the state holds, whether or not its outputs fit the contract.
	if f.outputs != nil {
		if err := p.r.stateKeeper().WriteInventory(ctx, p.subject, f.outputs); err != nil {
			return err
		}
	}
	if f.outputsErr == nil {
		// Check the contract on a copy first: the outputs Secret is offered only for
		// outputs that fit it.
		f.outputsErr = p.r.Kind.ApplyOutputs(p.obj.DeepCopyObject().(Object), f.outputs)
	}
	if f.outputsErr == nil {
		if err := p.r.stateKeeper().WriteOutputs(ctx, p.subject, f.outputs); err != nil {
			if _, ok := state.AsOutputError(err); !ok {
				return err
			}
			f.outputsErr = err
		}
	}
	return nil
}

// reportFinished reports a counted Job: its events, metrics and status.lastRun, and the
// backups after pruning them.
func (p *pass) reportFinished(ctx context.Context, f *finishedRun) {
	b := f.b
	if b.Outcome == infrav1.RunSucceeded {
		p.out.add(corev1.EventTypeNormal, "JobSucceeded", fmt.Sprintf("Job %s (%s) succeeded", b.Job, b.Op))
		if f.cur.Operation == infrav1.OperationRefresh {
			p.out.add(corev1.EventTypeNormal, "StateRefreshed", fmt.Sprintf("Job %s recorded in the state what changed outside Terraform (%s); no infrastructure was changed",
				b.Job, refreshSummary(f.out)))
		}
	} else {
		p.out.add(corev1.EventTypeWarning, "JobFailed", b.Event())
	}
	if f.outputs != nil || f.outputsErr != nil {
		p.rep.Outputs = outputsOf(f.outputsErr)
		var oe *state.OutputError
		if errors.As(f.outputsErr, &oe) {
			p.out.add(corev1.EventTypeWarning, oe.Reason, oe.Message)
		}
	}
	metrics.JobsFinished.WithLabelValues(p.r.Kind.Name(), string(b.Op), string(b.Outcome)).Inc()
	if start := f.job.Status.StartTime; start != nil {
		metrics.JobDuration.WithLabelValues(string(b.Op)).Observe(b.At.Sub(start.Time).Seconds())
	}
	if b.DriftFound {
		metrics.DriftDetected.WithLabelValues(p.r.Kind.Name()).Inc()
	}
	if lb := f.out.LockBroken; lb != nil {
		metrics.LocksBroken.WithLabelValues(p.r.Kind.Name()).Inc()
		p.out.add(corev1.EventTypeWarning, "StateLockBroken", fmt.Sprintf(
			"Job %s broke the stale state lock %s held by pod %s of Job %s (%s), which had ended without releasing it", b.Job, lb.LockID, lb.Pod, lb.Job, lb.Who))
	}
	if names := f.out.UndeclaredVariables; len(names) > 0 || f.out.UndeclaredTruncated {
		p.out.add(corev1.EventTypeWarning, infrav1.UndeclaredVariablesReason, fmt.Sprintf(
			"Job %s passed variables the module does not declare, which Terraform ignored: %s; remove them from spec.variables or spec.variablesFrom, or declare them in the module",
			b.Job, jobs.VariableList(names, f.out.UndeclaredTruncated, jobs.EventVariablesBytes)))
	}
	p.rep.LockHolder = f.out.LockHolder
	if pl := b.Plan; pl != nil && pl.IsCorrupt() {
		e := decide.CorruptPlanEvent(pl)
		p.out.add(e.Type, e.Reason, e.Message)
	}
	if pl := b.Plan; pl != nil && pl.Changes() && !pl.IsCorrupt() {
		e := decide.PlanSavedEvent(pl, p.ev, b.Job, p.r.Kind.Name(), p.obj.GetName())
		p.out.add(e.Type, e.Reason, e.Message)
	}
	if pl := b.Plan; pl != nil && pl.Violated() {
		p.out.add(corev1.EventTypeWarning, infrav1.PlanPolicyViolatedReason, fmt.Sprintf("plan %s breaks plan policy rules: %s", pl.ID, strings.Join(pl.Violations, "; ")))
	}
	for _, e := range decide.TargetEvents(b, f.cur) {
		p.out.add(e.Type, e.Reason, e.Message)
	}
	if f.backup != nil {
		p.out.add(corev1.EventTypeNormal, "StateBackedUp", fmt.Sprintf("state serial %d backed up to %s", f.backup.Serial, f.backup.Name))
		p.rep.Backups = p.r.stateKeeper().PruneBackups(ctx, p.subject, append([]decide.BackupView{*f.backup}, p.ev.State.Backups...))
	}
	p.reportReplica(f.replica, b.Job)
	if b.BackupDue {
		p.out.add(corev1.EventTypeNormal, "StateBackupDeferred", fmt.Sprintf(
			"the object is paused: the backup of the state Job %s left waits for the first pass after the pause (after a clusterctl move, in the target)", b.Job))
	}
	p.out.flush()
	p.rep.Bookkept = &f.b
	st := p.obj.GetTerraformStatus()
	st.LastRun = &infrav1.LastRun{Job: b.Job, Operation: b.Op, Outcome: b.Outcome,
		FinishedAt: &metav1.Time{Time: b.At}, Message: b.Message, Target: decide.CanonicalTarget(b.TargetRequest)}
	if f.cur.Operation.Background() {
		st.LastDriftCheck = &metav1.Time{Time: b.At}
		if b.DriftFound {
			p.out.add(corev1.EventTypeWarning, "DriftDetected", fmt.Sprintf("Job %s found drift: %s", b.Job, b.DriftSummary))
		}
		if b.DriftCheckRequest != "" {
			p.out.add(corev1.EventTypeNormal, "DriftCheckAnswered", driftCheckAnswer(b, p.obj.GetAnnotations()[infrav1.DriftCheckAnnotation]))
		}
		p.out.flush()
	}
}

// driftCheckAnswer is the note of the event that answers a drift check asked for
// (captf.io/drift-check): how the check ended, and whether a newer request (now, the value the
// object carries after the count) runs next.
func driftCheckAnswer(b decide.Bookkept, now string) string {
	var how string
	switch {
	case b.Outcome != infrav1.RunSucceeded:
		how = fmt.Sprintf("did not succeed (%s: %s); the request is answered and not retried, ask again once the cause is fixed", strings.ToLower(string(b.Outcome)), b.Message)
	case b.DriftFound:
		how = "found drift: " + b.DriftSummary
	case b.DriftChecked:
		how = "found no drift"
	default:
		how = "succeeded"
	}
	msg := fmt.Sprintf("Job %s answered the drift check asked for (%s=%s): it %s", b.Job, infrav1.DriftCheckAnnotation, b.DriftCheckRequest, how)
	if now != "" && now != b.DriftCheckRequest {
		msg += fmt.Sprintf("; the newer request %s runs next", now)
	}
	return msg
}

// releaseFinished deletes the per-run Secret and gives back the leases of a counted Job. Both
// are best effort: the Secret goes with its Job, and a lease whose holder finished is free.
func releaseFinished(ctx context.Context, c client.Client, leases *runlease.Manager, owner runlease.Owner, job *batchv1.Job) {
	rs := &corev1.Secret{}
	rs.Namespace, rs.Name = job.Namespace, naming.RunSecretName(job.Name)
	if err := c.Delete(ctx, rs); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "delete per-run secret", "secret", rs.Name)
	}
	deleteRunIdentitySecret(ctx, c, job)
	if _, err := leases.Release(ctx, owner, job.Name); err != nil {
		log.FromContext(ctx).Error(err, "release leases of a finished job", "job", job.Name)
	}
}

// recoverFromState rebuilds the contract fields and provisioned from the state of the last
// successful apply, for an object whose status was wiped.
func (p *pass) recoverFromState(ctx context.Context) (ctrl.Result, error) {
	st, outputsErr, err := p.r.stateKeeper().ReadOutputs(ctx, p.subject)
	if err != nil {
		return ctrl.Result{}, err
	}
	if outputsErr == nil {
		if err := p.patchMeta(ctx, func(o Object) { outputsErr = p.r.Kind.ApplyOutputs(o, st) }); err != nil {
			return p.conflictOr(ctx, err, "restore contract fields")
		}
	}
	p.rep.Outputs = outputsOf(outputsErr)
	var oe *state.OutputError
	switch {
	case outputsErr == nil:
		p.rep.Recovered = true
		p.out.add(corev1.EventTypeNormal, "StatusRecovered", "status rebuilt from the Terraform state; no Job was needed")
	case errors.As(outputsErr, &oe):
		p.out.add(corev1.EventTypeWarning, oe.Reason, oe.Message)
	}
	p.out.flush()
	return ctrl.Result{}, nil
}

// reportReplica reports the replication of the state a counted Job left: the condition, and a
// warning when the store did not take it.
func (p *pass) reportReplica(r *decide.ReplicaResult, job string) {
	if r == nil {
		return
	}
	p.rep.Replica = r
	if r.Reason != "" {
		p.out.add(corev1.EventTypeWarning, infrav1.StateNotReplicatedReason, fmt.Sprintf(
			"state serial %d of Job %s is not in the replica store (%s): %s; runs go on", r.Serial, job, r.Reason, r.Message))
	}
}

// replicateWhileRunning copies to the replica store a state version the state channel wrote
// while the object's Job runs (Terraform writes the state during a long apply, not only at its
// end), so the store holds every version a run leaves behind even when the run never ends (a
// node lost with it). It reads the state Secret's resourceVersion from the metadata cache: a
// pass that finds it where the start left it (noteStateVersion) or the last copy did sends
// nothing; a changed one costs one live read and one store write. A manager that did not start
// the run (it restarted, or took over) only notes the resourceVersion on its first running
// pass, so a version written before that is not copied; the count at the Job's end copies the
// last version as always.
func (p *pass) replicateWhileRunning(ctx context.Context) error {
	if p.r.StateReplica == nil || p.r.SecretMeta == nil {
		return nil
	}
	rv, ok, err := SecretVersion(ctx, p.r.SecretMeta, p.obj.GetNamespace(), naming.StateSecretName(p.subject.Suffix))
	if err != nil || !ok {
		return err
	}
	uid := p.obj.GetUID()
	last, seen := p.r.replicatedRV.Load(uid)
	if !seen {
		p.r.replicatedRV.Store(uid, replicatedVersion{rv: rv})
		return nil
	}
	if last.(replicatedVersion).rv == rv {
		return nil
	}
	r, err := p.r.stateKeeper().Replicate(ctx, p.subject, "")
	if err != nil || r == nil {
		return err
	}
	p.rep.Replica = r
	if r.Reason == "" {
		p.r.replicatedRV.Store(uid, replicatedVersion{rv: r.SecretVersion, copied: true})
		if r.Written {
			log.FromContext(ctx).V(1).Info("a state version written during the run reached the replica store", "serial", r.Serial)
		}
	}
	return nil
}

// noteStateVersion notes, as a run starts, the state Secret's resourceVersion the replica store
// already has ("" for no Secret yet), so the running passes copy every version the run writes,
// its first included.
func (p *pass) noteStateVersion(ctx context.Context) {
	if p.r.StateReplica == nil || p.r.SecretMeta == nil {
		return
	}
	rv, _, err := SecretVersion(ctx, p.r.SecretMeta, p.obj.GetNamespace(), naming.StateSecretName(p.subject.Suffix))
	if err != nil {
		return // the first running pass notes it instead
	}
	p.r.replicatedRV.Store(p.obj.GetUID(), replicatedVersion{rv: rv})
}

// replicatedVersion is what the running passes know of an object's state Secret: the
// resourceVersion last seen (rv) and whether the replica store took that very version (copied)
// or it was only noted (at the start, or by a manager that did not start the run).
type replicatedVersion struct {
	rv     string
	copied bool
}

// replicatedWhileRunning is the state Secret's resourceVersion a running pass copied to the
// store ("" when none did), so the count does not write the same version again.
func (p *pass) replicatedWhileRunning() string {
	if v, ok := p.r.replicatedRV.Load(p.obj.GetUID()); ok && v.(replicatedVersion).copied {
		return v.(replicatedVersion).rv
	}
	return ""
}

// ReplicaRetry is how often an idle object whose state did not reach the replica store tries
// again.
const ReplicaRetry = time.Minute

// catchUpReplica writes the current state of an idle object to the replica store when the last
// replication failed (StateReplicated False): the store was down when a Job was counted, and
// nothing else would write that version before the next Job. An object whose replica is not
// behind reads nothing, so an idle pass still sends no request.
func (p *pass) catchUpReplica(ctx context.Context) (ctrl.Result, error) {
	c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, infrav1.StateReplicatedCondition)
	if p.r.StateReplica == nil || c == nil || c.Status != metav1.ConditionFalse {
		return ctrl.Result{}, nil
	}
	r, err := p.r.stateKeeper().Replicate(ctx, p.subject, "")
	if err != nil || r == nil {
		return ctrl.Result{}, err
	}
	p.rep.Replica = r
	if r.Reason != "" {
		return ctrl.Result{RequeueAfter: ReplicaRetry}, nil
	}
	p.out.add(corev1.EventTypeNormal, infrav1.StateReplicatedReason, fmt.Sprintf(
		"state serial %d reached the replica store again, after %s", r.Serial, c.Reason))
	return ctrl.Result{}, nil
}

// takeDueBackup backs up the state a Job counted while the object was paused left
// (ActionBackup; st.BackupDue names the Job), removes the record with patch, and says so once
// that write succeeded. It returns the backups kept after pruning, nil when the state was no
// newer than the newest backup (the record goes all the same).
func takeDueBackup(ctx context.Context, k *state.Keeper, s state.Subject, st decide.StateEvidence,
	patch func(context.Context, func(Object)) error, out *outbox) ([]decide.BackupView, error) {
	b, err := k.Backup(ctx, s, st.BackupDue, st.Backups)
	if err != nil {
		return nil, err
	}
	if err := patch(ctx, func(o Object) { decide.RemoveAnnotation(o, infrav1.BackupDueAnnotation) }); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, nil
	}
	out.add(corev1.EventTypeNormal, "StateBackedUp", fmt.Sprintf(
		"state serial %d backed up to %s: the backup of Job %s, which ended while the object was paused", b.Serial, b.Name, st.BackupDue))
	out.flush()
	return k.PruneBackups(ctx, s, append([]decide.BackupView{*b}, st.Backups...)), nil
}

// outputsOf is the report of the outputs read this pass, with the reason of an outputs problem.
func outputsOf(err error) *decide.OutputsResult {
	o := &decide.OutputsResult{Err: err}
	if oe, ok := state.AsOutputError(err); ok {
		o.Reason = oe.Reason
	}
	return o
}
