package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// startRun is one Job start in progress: what its steps share.
type startRun struct {
	op   infrav1.Operation
	name string
	req  runlease.Request
	slot types.NamespacedName
	// keepSlot: the Job exists, or may (a create whose outcome is unknown keeps its slot).
	keepSlot bool
	// in are the run's inputs (prepare); job the Job created or adopted (createOrAdopt).
	in  *inputs.Inputs
	job *batchv1.Job
	// identity are the values of the object's TerraformIdentity's variables (prepareRun), nil
	// without one.
	identity map[string][]byte
	// copies are the data of the Job's per-run copies of the Secrets its pod reads, by source
	// (prepareRun, modulesecrets.Copies), nil without any.
	copies map[string]map[string][]byte
}

// start runs the Job start sequence (ARCHITECTURE.md step 8) as named steps: reserve a Job
// slot -> check a saved plan's artifacts against its record (an apply of a saved plan) -> take
// the run lease (and cluster lease) -> mark block-move and the run sequence and
// recheck pause live -> prepare the run (durable inputs, live lease confirmation, runner
// access) -> create the Job (AlreadyExists adopts) -> record the per-run Secret and
// status.activeJob. Each step returns proceed false when the start stops there, with the result
// and error the pass returns.
func (p *pass) start(ctx context.Context, op infrav1.Operation) (ctrl.Result, error) {
	name := naming.JobName(p.suffix, p.ev.Jobs.RunSeq)
	deadline := p.obj.GetTerraformSpec().Job.EffectiveActiveDeadlineSeconds()
	s := &startRun{op: op, name: name, slot: types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name},
		req: runlease.Request{Owner: p.owner, Holder: name, Operation: op, ActiveDeadlineSeconds: deadline}}

	if res, proceed, err := p.checkReplica(ctx, s); !proceed {
		return res, err
	}
	if res, proceed, err := p.reserveSlot(ctx, s); !proceed {
		return res, err
	}
	defer func() {
		if !s.keepSlot {
			p.r.Slots.Release(s.slot)
		}
	}()
	if res, proceed, err := p.verifySavedPlan(ctx, s); !proceed {
		return res, err
	}
	if res, proceed, err := p.takeLeases(ctx, s); !proceed {
		return res, err
	}
	if res, proceed, err := p.markAndRecheck(ctx, s); !proceed {
		return res, err
	}
	if res, proceed, err := p.prepareRun(ctx, s); !proceed {
		return res, err
	}
	if res, proceed, err := p.createOrAdopt(ctx, s); !proceed {
		return res, err
	}
	// The per-run Secrets, owned by the Job (deleted with it); a restore's carries the backup.
	var restore []byte
	if s.op == infrav1.OperationRestore {
		var err error
		if restore, err = p.r.stateKeeper().Restore(ctx, p.subject, p.ev.State.RestoreSerial); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := p.prep.writeRunSecrets(ctx, s, restore); err != nil {
		return ctrl.Result{}, err
	}
	p.noteStateVersion(ctx)
	// status.activeJob is reported, never load-bearing.
	p.obj.GetTerraformStatus().ActiveJob = &infrav1.ActiveJob{Name: s.name, Operation: s.op, StartTime: &metav1.Time{Time: p.r.Clock.Now()}}
	p.rep.Started = s.name
	return ctrl.Result{}, nil
}

// writeRunSecrets writes the per-run Secrets of the Job a start created or adopted, each owned
// by the Job (deleted with it): the identity's values, the copies of the Secrets the pod reads,
// and last the per-run inputs Secret (a restore's carries the state it pushes), whose redact
// list holds every value of the others. The pod mounts the last one, so it cannot start before
// the others exist.
func (pr *preparer) writeRunSecrets(ctx context.Context, s *startRun, restore []byte) error {
	if err := pr.writeRunIdentitySecret(ctx, s.job, s.identity); err != nil {
		return err
	}
	if err := pr.writeRunCopies(ctx, s.job, s.copies); err != nil {
		return err
	}
	return pr.writeRunSecret(ctx, s.job, redactRun(s.in, s.identity, s.copies), restore)
}

// checkReplica holds a Job that would write the state (an apply, a destroy, a refresh; not a
// restore, the way out) while the replica store holds a newer version of the state's lineage
// than the state Secret: a Secret older than what the object's Jobs wrote (a management cluster
// restored from an older backup) is never silently run on, nor silently replaced by the
// store's version. Under strict replication (spec.stateReplication Strict) it also holds every
// such Job, a restore included, until the store can be listed and holds the version the run
// starts from (it writes that version first when it is missing). One store listing per start,
// none on an idle pass; a store that cannot be listed holds nothing unless strict.
func (p *pass) checkReplica(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	k := p.r.stateKeeper()
	strict := strictReplication(p.obj)
	present := p.ev.State.Read == decide.StatePresent
	if k.Replica == nil || !s.op.Mutating() || (!strict && (s.op == infrav1.OperationRestore || !present)) {
		return ctrl.Result{}, true, nil
	}
	lineage, serial := "", int64(0)
	if present {
		lineage, serial = p.ev.State.Lineage, p.ev.State.Serial
	}
	ahead, listed, err := k.ReplicaAhead(ctx, p.subject, lineage, serial)
	if err != nil {
		if strict {
			return p.holdForReplica(fmt.Sprintf("the replica store cannot be listed: %v", err))
		}
		log.FromContext(ctx).Info("the replica store could not be listed for a newer state version; the run goes on", "why", err.Error())
		return ctrl.Result{}, true, nil
	}
	p.rep.ReplicaListed = listed
	if ahead != nil && s.op != infrav1.OperationRestore {
		msg := decide.ReplicaAheadMessage(ahead.Lineage, ahead.Serial, p.ev.State.Serial)
		p.holdOnState(infrav1.ReplicaAheadReason, msg)
		return ctrl.Result{RequeueAfter: 10 * time.Minute}, false, nil
	}
	if !strict || !present || decide.ReplicaHolds(listed, lineage, serial) {
		return ctrl.Result{}, true, nil
	}
	// Strict, and the store lacks the version the run starts from (its replication failed and
	// the catch-up has not run): write it now, or hold.
	r, err := k.Replicate(ctx, p.subject, "")
	if err != nil {
		return ctrl.Result{}, false, err
	}
	p.rep.Replica = r
	if r != nil && r.Reason != "" {
		return p.holdForReplica(fmt.Sprintf("the replica store does not hold state serial %d (lineage %s) and does not take it (%s): %s",
			serial, lineage, r.Reason, r.Message))
	}
	return ctrl.Result{}, true, nil
}

// holdForReplica holds a start of a strictly replicated object on the store (ReplicaRequired),
// and asks again in ReplicaRetry.
func (p *pass) holdForReplica(why string) (ctrl.Result, bool, error) {
	p.holdOnState(infrav1.ReplicaRequiredReason, "spec.stateReplication is Strict, so no Job that writes the state starts: "+why+
		"; it starts once the store answers and holds the state (asked again every minute), or set spec.stateReplication to BestEffort")
	return ctrl.Result{RequeueAfter: ReplicaRetry}, false, nil
}

// holdOnState reports a start held on the state (StateReadable False with reason), with one
// Warning event when the reason is new.
func (p *pass) holdOnState(reason, msg string) {
	if !decide.Reported(p.obj.GetTerraformStatus().Conditions, infrav1.StateReadableCondition, reason) {
		p.out.add(corev1.EventTypeWarning, reason, msg)
	}
	p.rep.StateProblem = &decide.Problem{ConditionType: infrav1.StateReadableCondition, Reason: reason, Message: msg}
}

// strictReplication reports whether the object asks for strict replication of its state.
func strictReplication(obj Object) bool {
	return obj.GetTerraformSpec().StateReplication == infrav1.StateReplicationStrict
}

// reserveSlot takes a Job slot of the manager (in memory: a wait here costs no API request).
func (p *pass) reserveSlot(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	free, err := p.r.Slots.Reserve(ctx, s.slot, s.op, p.r.Clock.Now())
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if !free {
		p.rep.SlotWait = true
		metrics.LeaseWaits.WithLabelValues(infrav1.WaitingForJobSlotReason).Inc()
		if !decide.Reported(p.obj.GetTerraformStatus().Conditions, decide.FamilyOf(s.op), infrav1.WaitingForJobSlotReason) {
			p.out.add(corev1.EventTypeNormal, infrav1.WaitingForJobSlotReason, fmt.Sprintf("%s waits for a free Job slot of the manager", s.op))
		}
		return ctrl.Result{RequeueAfter: SlotRequeue}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// takeLeases takes the run lease (and, for a cluster's mutating operation, the cluster lease).
func (p *pass) takeLeases(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	res, err := p.r.Leases.Acquire(ctx, s.req)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("acquire run lease: %w", err)
	}
	if !res.Acquired {
		w := res.Wait
		p.rep.LeaseWait = &decide.LeaseWait{Condition: w.Condition, Reason: w.Reason, Message: w.Message}
		metrics.LeaseWaits.WithLabelValues(w.Reason).Inc()
		if !w.Repeats(meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, w.Condition)) {
			p.out.add(corev1.EventTypeNormal, w.Reason, w.Message) // sent once the status patch records the wait
		}
		return ctrl.Result{RequeueAfter: w.RequeueAfter}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// markAndRecheck writes block-move and the run sequence with an optimistic lock (a pass on a
// stale object stops here with a conflict), then re-reads pause live: a move may have paused
// the Cluster a moment ago.
func (p *pass) markAndRecheck(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	logger, name := log.FromContext(ctx), s.name
	if err := p.patchMeta(ctx, func(o Object) {
		decide.SetAnnotation(o, infrav1.BlockMoveAnnotation, "")
		decide.SetAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(p.ev.Jobs.RunSeq, 10))
		decide.NoteFirstRun(o, p.ev, s.op, name)
	}); err != nil {
		res, err := p.conflictOr(ctx, err, "write block-move before the Job")
		return res, false, err
	}
	paused, err := livePaused(ctx, p.r.APIReader, client.ObjectKeyFromObject(p.obj), p.r.Kind.New(), p.owner.Cluster)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if paused {
		logger.Info("paused while starting; giving the lease back", "job", name)
		if err := releaseIfNoJob(ctx, p.r.Leases, p.owner, name); err != nil {
			return ctrl.Result{}, false, err
		}
		return ctrl.Result{RequeueAfter: time.Second}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// prepareRun assembles the run: the contract inputs and the inputs (a problem found now is
// reported and gives the leases back), the durable inputs (destroy reads them; they move with
// the object), a live confirmation that the lease is still ours (another manager may have
// taken it while we wrote), and the state channel's access (its account, Role and
// RoleBinding, and the empty state Secret and lock Lease it may read and update).
func (p *pass) prepareRun(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	logger, r, op, name := log.FromContext(ctx), p.r, s.op, s.name
	contract, wait, err := r.Kind.Contract(ctx, Env{Cache: r.Client, Live: r.APIReader, ClusterName: p.owner.Cluster}, p.obj)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("gather contract inputs: %w", err)
	}
	if wait != nil && !decide.BelongsToDestroy(p.d, op) {
		if err := releaseIfNoJob(ctx, p.r.Leases, p.owner, name); err != nil {
			return ctrl.Result{}, false, err
		}
		return ctrl.Result{RequeueAfter: wait.RequeueAfter}, false, nil
	}
	in, problem, err := p.prep.inputsForRun(ctx, p.d, op, contract)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if problem == nil {
		if problem, err = p.prep.runnerAccountProblem(ctx); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	if problem == nil {
		if s.identity, problem, err = p.prep.identityForRun(ctx); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	if problem == nil {
		if s.copies, problem, err = p.prep.moduleSecretsForRun(ctx); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	if problem != nil {
		p.rep.StartProblem = problem
		return ctrl.Result{}, false, releaseIfNoJob(ctx, p.r.Leases, p.owner, name)
	}
	if !decide.BelongsToDestroy(p.d, op) {
		if err := p.prep.writeDurableInputs(ctx, in); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	ours, err := r.Leases.Confirm(ctx, s.req)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("confirm run lease: %w", err)
	}
	if !ours {
		logger.Info("run lease no longer names our Job; not creating it", "job", name)
		return ctrl.Result{RequeueAfter: decide.LagRequeue}, false, nil
	}
	if err := p.prep.ensureRunnerAccess(ctx); err != nil {
		return ctrl.Result{}, false, err
	}
	if err := p.r.stateKeeper().Ensure(ctx, p.subject); err != nil {
		return ctrl.Result{}, false, err
	}
	s.in = in
	return ctrl.Result{}, true, nil
}

// createOrAdopt creates the Job. Its name is deterministic: AlreadyExists means an earlier
// attempt created it, and the start adopts it rather than make a second one; never a Job of
// another incarnation, and never one that already finished (the cache lags).
func (p *pass) createOrAdopt(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	logger, r, op, name := log.FromContext(ctx), p.r, s.op, s.name
	params := p.prep.jobParams(p.ev, p.d, p.ev.Jobs.RunSeq, op, s.in.Hash)
	params.IdentityEnv = identityEnvNames(s.identity)
	job, err := jobs.Build(params)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("build job: %w", err)
	}
	if op == infrav1.OperationDrift && p.ev.Drift.CheckRequest != "" {
		// The check answers the request it saw: bookkeeping removes only that value.
		job.Annotations[infrav1.DriftCheckAnnotation] = p.ev.Drift.CheckRequest
	}
	if err := r.Client.Create(ctx, job); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			existing := &batchv1.Job{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), existing); err != nil {
				return ctrl.Result{}, false, fmt.Errorf("adopt existing job %s: %w", name, err)
			}
			if !jobstatus.SameIncarnation(existing, p.obj.GetUID()) {
				// Another incarnation's Job has this name: never adopt it. Give back what this
				// attempt took and move the run sequence on.
				if _, err := r.Leases.Release(ctx, p.owner, name); err != nil {
					return ctrl.Result{}, false, fmt.Errorf("release leases of %s: %w", name, err)
				}
				res, err := p.skipRun(ctx, name)
				return res, false, err
			}
			if jobstatus.Finished(existing) {
				// This run's Job already ended, and this pass did not see it: the cache does
				// not show it yet. It is not the Job this pass starts, so it is not reported as
				// running; its events have come and gone, so no watch brings it back: look
				// again soon, and bookkeeping counts it once the cache shows it.
				logger.Info("the Job of this run already ended but the cache does not show it; looking again", "job", name)
				p.rep.LagJob = name
				return ctrl.Result{RequeueAfter: decide.LagRequeue}, false, nil
			}
			logger.Info("adopting the Job an earlier attempt created", "job", name)
			s.job, s.keepSlot = existing, true
			return ctrl.Result{}, true, nil
		case rejected(err):
			p.rep.Rejected = "the API server refused the Job: " + err.Error()
			p.out.add(corev1.EventTypeWarning, "JobRejected", "the API server refused Job "+name+": "+err.Error())
			if err := releaseIfNoJob(ctx, p.r.Leases, p.owner, name); err != nil {
				return ctrl.Result{}, false, err
			}
			return ctrl.Result{RequeueAfter: decide.BackoffBase}, false, nil
		default:
			// A timeout may hide a create that went through: keep the leases, and the slot.
			s.keepSlot = true
			return ctrl.Result{}, false, fmt.Errorf("create job %s: %w", name, err)
		}
	}
	s.job, s.keepSlot = job, true
	metrics.JobsStarted.WithLabelValues(p.r.Kind.Name(), string(op)).Inc()
	for _, e := range decide.StartEvents(p.ev, p.d, op, name) {
		p.out.add(e.Type, e.Reason, e.Message)
	}
	p.out.flush()
	return ctrl.Result{}, true, nil
}
