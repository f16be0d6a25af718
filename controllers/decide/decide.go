package decide

import (
	"fmt"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// JobPhase is what the cache says of a Job (jobstatus.Finished on the cached copy).
type JobPhase string

// Job phases.
const (
	JobRunning  JobPhase = "Running"
	JobFinished JobPhase = "Finished"
)

// JobView is the part of a Job the decision needs.
type JobView struct {
	Name       string
	Seq        int64
	Operation  infrav1.Operation
	InputsHash string
	Phase      JobPhase
	// RefreshOnly: a Plan or Drift Job that runs a refresh-only plan (RefreshOnlyAnnotation).
	RefreshOnly bool
	// DestroyPlan: a Plan Job that makes a destroy plan (DestroyPlanAnnotation).
	DestroyPlan bool
	// Target: the targeted operation the Job carries out, as the request was written
	// (TargetOperationAnnotation on the Job; "" for none).
	Target string
	// Foreign: the Job's controller owner reference names another incarnation of the object
	// (deleted and re-created under the same name). It runs against the same state, so it
	// blocks while it runs, but it is never adopted or counted.
	Foreign bool
	// Unready: a running Job whose status counts no ready pod (status.ready 0, as the Job
	// controller reports a pod that has not started): its pods are worth a look
	// (NeedsPendingPods).
	Unready bool
}

// StateView is what a live read of the object's state Secret found.
type StateView string

// State readings.
const (
	// StateNotRead: the state was not read live this pass.
	StateNotRead StateView = ""
	// StateAbsent: no state Secret, or one that holds no state.
	StateAbsent StateView = "Absent"
	// StatePresent: the Secret reads as a state.
	StatePresent StateView = "Present"
	// StateUnreadable: the Secret exists but cannot be read as a state (StateEvidence.Problem).
	StateUnreadable StateView = "Unreadable"
)

// BackupView is one state backup of the object (this incarnation's).
type BackupView struct {
	Name    string
	Serial  int64
	Lineage string
	Bytes   int64
	Time    time.Time
}

// PodsView is what a live listing of the current Job's pods found.
type PodsView string

// Pod listings.
const (
	// PodsNotListed: the pods were not read (the current Job has not finished, or there is none).
	PodsNotListed PodsView = ""
	// PodsTerminal: every pod of the Job is Succeeded or Failed (or there is none).
	PodsTerminal PodsView = "Terminal"
	// PodsRunning: a pod of the finished Job is still not terminal.
	PodsRunning PodsView = "Running"
)

// LagView is the outcome of the live cache-lag checks (controllers/cachelag).
type LagView struct {
	// Checked is true when the checks ran; they run only when NeedsLagCheck says so.
	Checked bool
	// Found is true when they found a Job of the object that the cache does not show.
	Found bool
	// Pending qualifies Found: the Job is not on the API server yet, but the run lease names it
	// inside its grace, so a pass (another manager's, or one before a restart) may be about to
	// create it. Nothing it would need may go (block-move, status.activeJob, the finalizer),
	// but a start under that lease may go on: it takes the same lease and adopts or creates
	// that Job (holdForPendingJob).
	Pending bool
	// Job and Reason say what they found.
	Job, Reason string
}

// Evidence is everything a pass knows when it decides, in named parts. Gathering it is the only
// part of a pass that reads; Decide is a pure function of it. Now is the only clock a decision
// knows.
type Evidence struct {
	Now time.Time

	// Object is what the object itself says, from the cache.
	Object ObjectEvidence
	// Jobs is what the cache shows of the object's Jobs (and the live listing of the pods of
	// the current one once it finished).
	Jobs JobsEvidence
	// Lag is the outcome of the live cache-lag checks (NeedsLagCheck).
	Lag LagView
	// Inputs are the decision inputs (NeedsDecisionInputs).
	Inputs InputsEvidence
	// State is the object's Terraform state and its identity (I6, I7).
	State StateEvidence
	// Plan is the object's saved plans (I9).
	Plan PlanEvidence
	// Drift is the drift schedule and what a drift check or a person asked for.
	Drift DriftEvidence
	// Target is the targeted operation a person asked for (captf.io/target-operation).
	Target TargetEvidence
	// Retry is the failure backoff.
	Retry RetryEvidence
	// Health is the module's health signal (TerraformMachine).
	Health HealthEvidence
}

// ObjectEvidence is what the object's metadata, spec and status say.
type ObjectEvidence struct {
	Deleting     bool
	HasFinalizer bool
	// Paused: the object's paused annotation or its Cluster's spec.paused.
	Paused bool
	// MoveDeletion: the object carries clusterctl's delete-for-move annotation.
	MoveDeletion bool
	BlockMove    bool
	// ActiveJob is status.activeJob.name ("" when unset).
	ActiveJob string
	// Provisioned is status.initialization.provisioned.
	Provisioned bool
	// DeletionPolicy is spec.deletionPolicy ("" means Destroy).
	DeletionPolicy infrav1.DeletionPolicy
	// Destroyed: a destroy Job of this object succeeded (durable annotation captf.io/destroyed).
	Destroyed bool
	// Abandon: the abandon-infrastructure annotation names this object's UID. It applies only
	// to a deleting object, or to one its state holds (AbandonApplies); anywhere else it is
	// void and removed (AbandonVoid).
	Abandon bool
	// AbandonPredates: on a deleting object, the object's managedFields prove that the abandon
	// annotation was last set before the deletion began (AbandonSetBefore); false when they
	// cannot tell.
	AbandonPredates bool
	// DestroyWithoutPlan: the destroy-without-plan annotation names this object's UID, the
	// override groups' break-glass path past a destroy plan (NeedsDestroyPlan).
	DestroyWithoutPlan bool
}

// JobsEvidence is what the cache shows of the object's Jobs.
type JobsEvidence struct {
	// RunSeq is the object's durable run sequence; the Job of RunSeq is Current.
	RunSeq int64
	// Current is the Job of RunSeq as the cache shows it (nil: not in the cache).
	Current *JobView
	// Running lists every running Job of the object in the cache (normally at most Current).
	Running []JobView
	// CurrentPods is the live listing of the pods of Current once it has finished
	// (NeedsPods).
	CurrentPods PodsView
	// PullFailure, read live while the running Job has no ready pod (NeedsPendingPods), is a
	// container of its pod that waits for an image the kubelet cannot pull.
	PullFailure *PullFailure
	// StartBlock, read with PullFailure, is why the running Job's pod has not started its main
	// container (nil: nothing blocks); NeverStarted, read with it, says the pods prove that no
	// main container ever started (jobstatus.NoContainerStarted).
	StartBlock   *StartBlock
	NeverStarted bool
}

// InputsEvidence are the decision inputs, read only when NeedsDecisionInputs says so.
type InputsEvidence struct {
	// Gathered is true when the fields below were read (NeedsDecisionInputs).
	Gathered bool
	// DependencyWait, when set, is what the object waits for before it can apply.
	DependencyWait *Wait
	// Problem, when set, is why the inputs cannot be assembled.
	Problem     *Problem
	DesiredHash string
	// AppliedHash is the hash of the inputs last applied (annotation captf.io/applied-hash).
	AppliedHash string
	// Children are machines and pools that still exist (a deleting cluster waits for them).
	Children []string
}

// StateEvidence is the object's Terraform state (I6, I7).
type StateEvidence struct {
	// AppliedBefore: the object applied before (the applied hash, a backup of this
	// incarnation, or provisioned).
	AppliedBefore bool
	// SecretCached: the metadata cache of CAPTF's Secrets lists the state Secret. Only its
	// absence is acted on, after a live read.
	SecretCached bool
	// Read is what the live read of the state Secret found (NeedsLiveState).
	Read StateView
	// Problem says why an unreadable state cannot be read.
	Problem *Problem
	// Lineage is the state's lineage; Empty says it tracks no managed resource; Serial is its
	// serial.
	Lineage string
	Empty   bool
	Serial  int64
	// Backups are the object's state backups, newest first.
	Backups []BackupView
	// The state's identity (docs/state.md, "Whose state it is"). OwnLineage is the lineage of
	// the state the object wrote or adopted (annotation captf.io/object-state-lineage; without
	// it, the lineage of its newest backup); "" when it never wrote one. AdoptLineage is the
	// captf.io/adopt-state annotation: the lineage of a state the object never wrote that an
	// override group member lets it take over.
	OwnLineage   string
	AdoptLineage string
	// FirstRun: the object's first mutating Job started while no state existed (annotation
	// captf.io/state-first-run naming this incarnation), and no lineage is recorded yet: the
	// state present now is the one that Job wrote, not a retained one (RetainedState).
	FirstRun bool
	// LineageSuspect: a Job left a state of another lineage than OwnLineage (annotation
	// captf.io/state-lineage-seen), so the state is read live until that is settled.
	LineageSuspect bool
	// RestoreSerial is the restore-state annotation ("" when unset); RestoreFailed the serial
	// whose restore failed.
	RestoreSerial string
	RestoreFailed string
	// BackupDue names the last mutating Job counted while the object was paused, whose state
	// is not backed up yet (annotation captf.io/backup-due; BacksUpNow).
	BackupDue string
	// Replica is what the replica store holds for an object with no state of its own
	// (NeedsReplicaLookup; nil when it was not looked at or no store is configured).
	Replica *ReplicaLookup
}

// PlanEvidence is the object's saved plans (I9). ApplyPolicy and DestructiveChanges are the
// spec's; Pending the plan waiting for approval (annotation captf.io/pending-plan); Approved the
// approve-plan annotation; Applied the last plan applied (annotation captf.io/applied-plan);
// PolicySelected that a TerraformPlanPolicy selects the object.
type PlanEvidence struct {
	ApplyPolicy        infrav1.ApplyPolicy
	DestructiveChanges infrav1.DestructiveChanges
	Pending            *infrav1.PlanRecord
	Approved           string
	Applied            string
	PolicySelected     bool
}

// DriftEvidence is the drift schedule. DueAt is when the next check is due (DriftDueAt; zero:
// checks off); Mode is spec.drift.mode; Remediate names the drift Job whose drift an apply must
// remediate (annotation captf.io/remediate); RefreshRequest is the value of the annotation
// captf.io/refresh, a refresh asked for by a person (empty: none); Last is the durable record of
// the last check's finding and what came of it (annotation captf.io/drift-finding; nil: none).
// CheckRequest is the value of the annotation captf.io/drift-check, a check asked for now by a
// person (empty: none; DriftCheckRequested).
type DriftEvidence struct {
	DueAt          time.Time
	Mode           infrav1.DriftMode
	Remediate      string
	RefreshRequest string
	Last           *infrav1.DriftRecord
	CheckRequest   string
}

// RetryEvidence is the failure backoff: At is when a failed operation may be retried (zero:
// now), and LastError why it failed.
type RetryEvidence struct {
	At        time.Time
	LastError string
}

// Wait says why a pass starts nothing.
type Wait struct {
	ConditionType string
	Reason        string
	Message       string
	RequeueAfter  time.Duration
}

// Problem is an error a user must fix; it becomes a False condition.
type Problem struct {
	ConditionType string
	Reason        string
	Message       string
}

// Action is what a pass does.
type Action string

// Actions.
const (
	// ActionNone: a deleting object whose finalizer is gone; nothing is left to do.
	ActionNone Action = "None"
	// ActionAddFinalizer: add the provider finalizer before anything else.
	ActionAddFinalizer Action = "AddFinalizer"
	// ActionWaitJob: a Job runs (or its pods do); keep block-move and activeJob, wait.
	ActionWaitJob Action = "WaitJob"
	// ActionBookkeep: count the finished current Job once (outcome, outputs, markers, leases).
	ActionBookkeep Action = "Bookkeep"
	// ActionWaitLag: the cache trails the API server (or the live checks did not run); change
	// nothing, look again after LagRequeue.
	ActionWaitLag Action = "WaitLag"
	// ActionStart: start a Job of Operation.
	ActionStart Action = "Start"
	// ActionIdle: nothing to run.
	ActionIdle Action = "Idle"
	// ActionRecoverStatus: nothing to run, but status lost what the state still says (a move
	// drops status): rebuild it from the state without a Job.
	ActionRecoverStatus Action = "RecoverStatus"
	// ActionBackup: nothing to run, but a mutating Job counted while the object was paused left
	// its state without a backup (BackupDue): back the state up as it is now, without a Job.
	ActionBackup Action = "Backup"
	// ActionWait: blocked (dependency, inputs, backoff, children, paused).
	ActionWait Action = "Wait"
	// ActionRemoveFinalizer: the object may go with its state kept (a move); remove the finalizer.
	ActionRemoveFinalizer Action = "RemoveFinalizer"
	// ActionCleanup: the destroy succeeded (or nothing was ever created): delete state, inputs
	// and leases, then remove the finalizer.
	ActionCleanup Action = "Cleanup"
	// ActionRetain: deletionPolicy Retain: let the object go without a destroy, keeping its
	// state, durable inputs and backups (no longer protected or owned).
	ActionRetain Action = "Retain"
	// ActionAbandon: an audited abandon: as Retain, with a Warning event.
	ActionAbandon Action = "Abandon"
	// ActionSkipRun: the Job of the current run sequence belongs to another incarnation of the
	// object and has finished: move the run sequence on without counting it.
	ActionSkipRun Action = "SkipRun"
	// ActionDeleteJob: a deleting object's running Job can never start and never ran terraform
	// (NeverStartedJobGoes): delete it, keeping block-move and status.activeJob, so the
	// deletion does not wait out its deadline.
	ActionDeleteJob Action = "DeleteJob"
	// ActionLeaveState: a deleting object that never wrote a state finds one it did not write
	// (RetainedState) and has not adopted: let the object go without a destroy and without
	// touching that state, which is not its own.
	ActionLeaveState Action = "LeaveState"
	// ActionImportReplica: the replica store holds a state for an object with none of its own,
	// and the adopt opt-in names its lineage (ReplicaImport): bring Decision.Import back from the
	// store as a backup of the object and ask for its restore (no Job yet; the restore is one).
	ActionImportReplica Action = "ImportReplica"
)

// Decision is the outcome of Decide: one action, and what it does to the guarded marks.
type Decision struct {
	Action    Action
	Operation infrav1.Operation
	// SetBlockMove: write block-move if missing (while a Job runs or work may start).
	SetBlockMove bool
	// ClearBlockMove: remove block-move (only when paused or leaving, nothing runs, no lag).
	ClearBlockMove bool
	// SetActiveJob names the running Job status.activeJob must name ("" to leave it).
	SetActiveJob string
	// ClearActiveJob: clear status.activeJob (nothing runs, no lag; or it names the Job being
	// bookkept).
	ClearActiveJob bool
	// PlanID names the saved plan an apply or a refresh runs (empty: a plain one).
	PlanID string
	// RefreshOnly: the Plan Job started makes a refresh-only plan.
	RefreshOnly bool
	// DestroyPlan: the Plan Job started makes a destroy plan (a deleting object's,
	// NeedsDestroyPlan).
	DestroyPlan bool
	// Wait explains ActionWait, ActionWaitJob and ActionWaitLag.
	Wait *Wait
	// Problem, when set, becomes a False condition.
	Problem *Problem
	// VoidAbandon, when set, says why the abandon annotation is void (AbandonVoid): act removes
	// it, before the action, and emits it as the Warning event AbandonVoided.
	VoidAbandon string
	// Import is the replica version ActionImportReplica brings back.
	Import *ReplicaVersionView
}

// Clears reports whether the decision removes block-move, status.activeJob or the finalizer.
func (d Decision) Clears() bool {
	return d.ClearBlockMove || d.ClearActiveJob || d.LetsGo()
}

// LetsGo reports whether the decision removes the object's finalizer.
func (d Decision) LetsGo() bool {
	switch d.Action {
	case ActionRemoveFinalizer, ActionCleanup, ActionRetain, ActionAbandon, ActionLeaveState:
		return true
	}
	return false
}

// StartedOperations are the operations Decide starts Jobs of. The decision's tests prove each
// reachable and no other; the docs test holds docs/lifecycle.md to this list.
var StartedOperations = []infrav1.Operation{infrav1.OperationApply, infrav1.OperationDestroy, infrav1.OperationRestore,
	infrav1.OperationDrift, infrav1.OperationPlan, infrav1.OperationRefresh}

// LagRequeue is how long a pass that saw cache lag waits before it looks again.
const LagRequeue = 5 * time.Second

// PodsRequeue is how soon a pass looks again at a finished Job whose pods still run (pods
// are not watched).
const PodsRequeue = 10 * time.Second

// NeedsPods reports whether the pass must list the current Job's pods live: the Job finished
// in the cache and nothing else runs, so bookkeeping is next, and a pod still running would
// make it early.
func NeedsPods(ev Evidence) bool {
	return ev.Object.HasFinalizer && len(ev.Jobs.Running) == 0 && ev.Jobs.Current != nil && ev.Jobs.Current.Phase == JobFinished
}

// NeedsLagCheck reports whether the live cache-lag checks can change what this pass does:
// only when nothing runs in the cache, no finished Job waits to be counted (the source copy
// of a move counts none: once its last Job's pods are terminal, it is judged like an object
// with no Job to count), and the pass could clear block-move or status.activeJob or drop the
// finalizer. An idle object reads nothing live.
func NeedsLagCheck(ev Evidence) bool {
	if !ev.Object.HasFinalizer || len(ev.Jobs.Running) > 0 {
		return false
	}
	if NeedsPods(ev) && !(MovingOut(ev) && ev.Jobs.CurrentPods == PodsTerminal) {
		return false
	}
	wouldClearBlockMove := ev.Object.BlockMove && (ev.Object.Paused || ev.Object.Deleting)
	return wouldClearBlockMove || ev.Object.ActiveJob != "" || ev.Object.Deleting
}

// NeedsDecisionInputs reports whether the pass gets as far as choosing an operation, so the
// decision inputs (dependencies and inputs hash, or children) are worth reading.
func NeedsDecisionInputs(ev Evidence) bool {
	if !ev.Object.HasFinalizer || ev.Object.Paused || len(ev.Jobs.Running) > 0 || NeedsPods(ev) {
		return false
	}
	return !NeedsLagCheck(ev) || (ev.Lag.Checked && (!ev.Lag.Found || ev.Lag.Pending))
}

// NeedsLiveState reports whether the pass must read the state Secret live: it has read its
// decision inputs, and it deletes, or it carries an abandon (judged against the state), or an
// apply may start (a new object's first apply too: a state it finds but never wrote holds it,
// RetainedState), or a Job left a state of another lineage (LineageSuspect), or the object
// applied before and either another Job that touches the state may start (a restore, a
// remediation or a refresh asked for, a drift check due or asked for) or the cache no
// longer lists the state Secret. An idle object whose state Secret
// the cache lists (and that carries no abandon) reads nothing.
func NeedsLiveState(ev Evidence) bool {
	if !ev.Inputs.Gathered {
		return false
	}
	if ev.Object.Deleting || ev.Object.Abandon {
		// An abandon is judged against the state: it applies while the state holds the object.
		return true
	}
	return ev.Inputs.DesiredHash != ev.Inputs.AppliedHash || ev.State.LineageSuspect ||
		ev.State.AppliedBefore && (!ev.State.SecretCached || ev.State.RestoreSerial != "" || ev.Drift.Remediate != "" || ev.Drift.RefreshRequest != "" || ev.Target.Request != "" || DriftDue(ev) || DriftCheckRequested(ev))
}

// DriftDue reports whether a drift check is due: checks are on, the object applied before,
// and the due time has come.
func DriftDue(ev Evidence) bool {
	return !ev.Drift.DueAt.IsZero() && ev.State.AppliedBefore && !ev.Now.Before(ev.Drift.DueAt)
}

// Decide picks what a pass does. It is pure: same evidence, same decision. Every branch that
// sets, keeps or clears block-move, status.activeJob or the finalizer, and every start,
// bookkeeping or wait for a Job, is decided here and nowhere else; so is the voiding of a
// dormant abandon (AbandonVoid), which rides on a decision that does not let the object go.
func Decide(ev Evidence) Decision {
	d := decide(ev)
	if ev.Lag.Pending {
		d = holdForPendingJob(ev, d)
	}
	if !d.LetsGo() {
		d.VoidAbandon = AbandonVoid(ev)
	}
	return d
}

// holdForPendingJob keeps what a Job that may still be created would need: a decision that
// clears block-move or lets the object go waits instead, and one that carries on (a start
// under that very lease, a wait) keeps status.activeJob. Without it, a pass of one manager
// saw an object paused and cleared block-move while another manager, holding the run lease,
// was about to create its Job (the soak's seed 1495); and with a blanket wait instead, a
// deleting object whose own earlier pass took the lease for its destroy waited out the whole
// grace before it could start that destroy (seed 1499).
func holdForPendingJob(ev Evidence, d Decision) Decision {
	if d.ClearBlockMove || d.LetsGo() {
		return Decision{Action: ActionWaitLag, Wait: &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
			Message: fmt.Sprintf("Job %s may still be created (%s); nothing it needs is cleared until it runs or the lease frees", ev.Lag.Job, ev.Lag.Reason)}}
	}
	d.ClearActiveJob = false
	return d
}

func decide(ev Evidence) Decision {
	if !ev.Object.HasFinalizer {
		if ev.Object.Deleting {
			// Gone as far as this controller can tell: the API server deletes it now.
			return Decision{Action: ActionNone}
		}
		// The finalizer first; a Job that runs keeps block-move in the same write.
		return Decision{Action: ActionAddFinalizer, SetBlockMove: len(ev.Jobs.Running) > 0 && !ev.Object.BlockMove}
	}

	// A Job that runs, or a finished one not counted yet, comes before everything else.
	if d, ok := decideJobs(ev); ok {
		return d
	}

	// From here on nothing runs as far as the cache tells. A clear needs the live checks.
	if NeedsLagCheck(ev) {
		switch {
		case !ev.Lag.Checked:
			return Decision{Action: ActionWaitLag, Wait: &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
				Message: "the live cache-lag checks did not run; nothing is cleared without them"}}
		case ev.Lag.Found && !ev.Lag.Pending:
			return Decision{Action: ActionWaitLag, Wait: &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
				Message: fmt.Sprintf("Job %s may run while the cache does not show it: %s; nothing is cleared until it does or the lease frees", ev.Lag.Job, ev.Lag.Reason)}}
		}
	}
	clearActive := ev.Object.ActiveJob != ""

	if ev.Object.Deleting {
		return decideDeletion(ev, clearActive)
	}
	if ev.Object.Paused {
		// Paused: start nothing, and let clusterctl move proceed.
		return Decision{Action: ActionWait, ClearBlockMove: ev.Object.BlockMove, ClearActiveJob: clearActive,
			Wait: &Wait{ConditionType: infrav1.PausedCondition, Reason: infrav1.PausedReason, Message: "reconciliation is paused"}}
	}
	d := Decision{SetBlockMove: !ev.Object.BlockMove, ClearActiveJob: clearActive}
	if !ev.Inputs.Gathered {
		d.Action = ActionWait
		d.Wait = &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
			Message: "the decision inputs were not read; nothing starts without them"}
		return d
	}
	if ev.State.BackupDue != "" {
		// Before anything that writes the state again (a restore, an apply): the state a Job
		// counted while paused gets its backup first.
		d.Action = ActionBackup
		return d
	}
	if ev.State.RestoreSerial != "" {
		return decideRestore(ev, d)
	}
	if v := ReplicaImport(ev); v != nil {
		d.Action, d.Import = ActionImportReplica, v
		return d
	}
	if w := replicaHold(ev); w != nil {
		d.Action, d.Wait = ActionWait, w
		return d
	}
	if w := stateHold(ev); w != nil {
		d.Action, d.Wait = ActionWait, w
		return d
	}
	return decideOperation(ev, d)
}

// activeJobIsNewer reports whether status.activeJob may name a Job of a later run than the
// running Job the cache shows: the cache lists a Job of an earlier run as running while the
// object's run sequence moved past it and the cache does not list the current run's Job. Another
// manager (or this one before a restart) started that run; the Job cache lags behind the
// object's. status.activeJob then stays as it is: moving it back to the older Job would take
// it off a Job that runs (I4), which the guard refuses anyway.
func activeJobIsNewer(ev Evidence, run JobView) bool {
	return ev.Object.ActiveJob != "" && run.Seq < ev.Jobs.RunSeq && ev.Jobs.Current == nil
}

// decideJobs decides while a Job of the object runs or its finished current Job waits to be
// counted: ok is false when neither is the case.
func decideJobs(ev Evidence) (Decision, bool) {
	// A running Job wins over everything: keep the marks and wait for its watch event.
	if len(ev.Jobs.Running) > 0 {
		run := ev.Jobs.Running[0]
		d := Decision{Action: ActionWaitJob, SetBlockMove: !ev.Object.BlockMove}
		if ev.Object.ActiveJob != run.Name && !activeJobIsNewer(ev, run) {
			d.SetActiveJob = run.Name
		}
		d.Wait = pendingWait(ev)
		if NeverStartedJobGoes(ev) {
			d.Action = ActionDeleteJob
		}
		return d, true
	}
	if ev.Jobs.Current != nil && ev.Jobs.Current.Phase == JobFinished {
		cur := ev.Jobs.Current
		if ev.Jobs.CurrentPods != PodsTerminal {
			// I2/I3: the Job finished but a pod still runs (or was not looked at): the Job is
			// not over until its pods are.
			return Decision{Action: ActionWaitJob, SetBlockMove: !ev.Object.BlockMove,
				Wait: &Wait{Reason: infrav1.JobRunningReason, RequeueAfter: PodsRequeue,
					Message: fmt.Sprintf("Job %s finished but a pod of it is not terminated yet", cur.Name)}}, true
		}
		if MovingOut(ev) {
			// Counted before clusterctl copied the object (block-move waits for that): the
			// run sequence only looks behind because clusterctl replaced the annotations.
			return Decision{}, false
		}
		if cur.Foreign {
			// A Job of a previous incarnation took this run's name: never count it as ours.
			return Decision{Action: ActionSkipRun}, true
		}
		return Decision{Action: ActionBookkeep, Operation: cur.Operation, ClearActiveJob: ev.Object.ActiveJob == cur.Name}, true
	}
	return Decision{}, false
}

// decideOperation picks the operation of a settled object that is not deleting: an apply the
// inputs or a drift remediation want (through a saved plan when its policy asks for one), a
// refresh, a drift check (due, or asked for), a status recovery, or nothing.
func decideOperation(ev Evidence, d Decision) Decision {
	switch {
	case ev.Inputs.DependencyWait != nil:
		d.Action, d.Wait = ActionWait, ev.Inputs.DependencyWait
	case ev.Inputs.Problem != nil:
		d.Action, d.Problem = ActionWait, ev.Inputs.Problem
	case (ev.Inputs.DesiredHash != "" && ev.Inputs.DesiredHash != ev.Inputs.AppliedHash) || (ev.Drift.Remediate != "" && ev.Drift.Mode == infrav1.DriftModeRemediate):
		// Changed inputs, or a drift check found drift to remediate: an apply, through a
		// saved plan when the object's policy asks for one.
		switch {
		case ev.Now.Before(ev.Retry.At):
			d.Action = ActionWait
			d.Wait = backoffWait(ev, "apply")
		case ev.State.AppliedBefore && ev.State.Read != StatePresent:
			// I7: an object that applied before applies only against its own state, read.
			d.Action = ActionWait
			d.Wait = &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
				Message: "the state was not read; no apply starts without it"}
		case NeedsPlan(ev):
			return decidePlan(ev, d)
		default:
			d.Action, d.Operation = ActionStart, infrav1.OperationApply
		}
	case TargetWanted(ev):
		// A targeted operation asked for (replace, import): an apply of its own. It comes
		// after an apply the inputs want, which carries it out itself (TargetOf).
		return decideTarget(ev, d)
	case RefreshWanted(ev):
		// A refresh asked for, or drift to accept: a refresh-only apply. It writes the state,
		// so it comes after an apply the inputs want (the case above) and runs alone like one.
		switch w := stateWriterWait(ev, "refresh"); {
		case w != nil:
			d.Action, d.Wait = ActionWait, w
		case ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual:
			return decideRefreshPlan(ev, d)
		default:
			d.Action, d.Operation = ActionStart, infrav1.OperationRefresh
		}
	case DriftDue(ev) || DriftCheckRequested(ev):
		// A check due, or asked for now (captf.io/drift-check): it comes after every
		// operation above. I7: a drift check runs only against the object's own state, read.
		if ev.State.Read != StatePresent {
			d.Action = ActionWait
			d.Wait = &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue, Message: "the state was not read; no drift check starts without it"}
			return d
		}
		d.Action, d.Operation = ActionStart, infrav1.OperationDrift
	case !ev.Object.Provisioned && ev.Inputs.AppliedHash != "":
		d.Action = ActionRecoverStatus
	default:
		d.Action = ActionIdle
		if !ev.Drift.DueAt.IsZero() && ev.State.AppliedBefore {
			// Wake up when the next drift check is due; nothing is read until then.
			d.Wait = &Wait{RequeueAfter: ev.Drift.DueAt.Sub(ev.Now)}
		}
	}
	return d
}

// MovingOut reports an object that clusterctl move is taking away: paused, and marked with
// delete-for-move (which only the manager's identity and the override groups may set), before or
// after the deletion itself. Its copy in the target carries on; this one lets go without a
// destroy and is never counted again: clusterctl replaced all its annotations with
// delete-for-move before deleting it, so the run sequence reads as if its last Job had never
// been counted, and counting it again would re-create backups in the cluster being emptied.
func MovingOut(ev Evidence) bool {
	return ev.Object.Paused && ev.Object.MoveDeletion
}

// BacksUpNow reports whether a mutating Job's state is backed up when the Job is counted. Not
// while the object is paused: a clusterctl move pauses, waits for the Job, then copies what it
// discovered before the pause, so a backup taken then would stay behind in the source, held by
// its protection finalizer. The Job's name is recorded instead (captf.io/backup-due) and the
// first pass that is not paused backs the state up (ActionBackup), in the target after a move.
func BacksUpNow(ev Evidence) bool {
	return !ev.Object.Paused
}

// stateWriterWait is the wait of a request that writes the object's state on its own (a refresh,
// a targeted operation; what names it), or nil when it may start: it waits out a failed run's
// backoff, and (I7) it changes only the object's own state, read this pass.
func stateWriterWait(ev Evidence, what string) *Wait {
	switch {
	case ev.Now.Before(ev.Retry.At):
		return backoffWait(ev, "run")
	case ev.State.Read != StatePresent:
		// I7: a refresh or a targeted operation writes the object's own state, read.
		return &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
			Message: "the state was not read; no " + what + " starts without it"}
	}
	return nil
}

// RefreshWanted reports a refresh to run: one asked for (captf.io/refresh), or drift found by a
// check under mode Accept (captf.io/remediate names that check). Only an object that applied
// has a state to refresh; a request on a newer object waits for its first apply.
func RefreshWanted(ev Evidence) bool {
	return ev.State.AppliedBefore && (ev.Drift.RefreshRequest != "" || ev.Drift.Remediate != "" && ev.Drift.Mode == infrav1.DriftModeAccept)
}

func decideDeletion(ev Evidence, clearActive bool) Decision {
	if ev.Object.Paused {
		if MovingOut(ev) {
			// clusterctl move pauses, then deletes the source objects after copying them:
			// destroy nothing, keep the state (it moved), let the object go.
			return Decision{Action: ActionRemoveFinalizer, ClearBlockMove: ev.Object.BlockMove, ClearActiveJob: clearActive}
		}
		// A paused deletion waits: destroying now could race a move or a human's pause.
		return Decision{Action: ActionWait, ClearBlockMove: ev.Object.BlockMove, ClearActiveJob: clearActive,
			Wait: &Wait{ConditionType: infrav1.DeletingCondition, Reason: infrav1.PausedReason,
				Message: "deletion waits: the object is paused, so nothing is destroyed until it is unpaused"}}
	}
	// Not paused, a delete-for-move annotation is an ordinary deletion: an annotation alone
	// cannot skip a destroy.
	d := Decision{ClearActiveJob: clearActive, SetBlockMove: !ev.Object.BlockMove}
	letGo := func(a Action) Decision {
		d.Action, d.SetBlockMove, d.ClearBlockMove = a, false, ev.Object.BlockMove
		return d
	}
	switch {
	case !ev.Inputs.Gathered || ev.State.Read == StateNotRead:
		d.Action = ActionWait
		d.Wait = &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue,
			Message: "the deletion inputs were not read; nothing is destroyed or cleaned up without them"}
	case ev.State.BackupDue != "":
		// Before the destroy (or a Retain) writes or hands over the state: its due backup.
		d.Action = ActionBackup
	case len(ev.Inputs.Children) > 0:
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.DeletionBlockedCondition, Reason: infrav1.WaitingForMachinesReason,
			Message: "waiting for machines and pools to be deleted: " + joinMax(ev.Inputs.Children, 5)}
	case ev.Object.DeletionPolicy == infrav1.DeletionPolicyRetain:
		return letGo(ActionRetain)
	case ev.Object.Abandon:
		if AbandonApplies(ev) {
			return letGo(ActionAbandon)
		}
		// Set before the deletion began, on an object its state does not hold: void (Decide
		// removes it) and decided as if it were not there, so the destroy runs.
		without := ev
		without.Object.Abandon = false
		return decideDeletion(without, clearActive)
	case ev.State.RestoreSerial != "":
		return decideRestore(ev, d)
	case RetainedState(ev):
		// A state this object never wrote, not adopted: not its infrastructure. Nothing is
		// destroyed and that state is left as it is (never deleted, I6).
		return letGo(ActionLeaveState)
	case ev.Object.Destroyed && (ev.State.Read == StateAbsent || ev.State.Read == StatePresent && ev.State.Empty):
		// The destroy succeeded and left nothing behind: clean up and let go (I6).
		return letGo(ActionCleanup)
	case ev.Object.Destroyed && ev.State.Read == StatePresent:
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.DeletingCondition, Reason: infrav1.DestroyingReason, RequeueAfter: time.Minute,
			Message: "the destroy succeeded but the state still lists resources; the state is kept. Inspect it (see docs/state.md), " +
				"then remove the annotation " + infrav1.DestroyedAnnotation + " to destroy again"}
	case ev.State.Read == StateAbsent && !ev.State.AppliedBefore:
		// Nothing was ever created: nothing to destroy.
		return letGo(ActionCleanup)
	case stateHold(ev) != nil:
		d.Action, d.Wait = ActionWait, stateHold(ev)
	case ev.Now.Before(ev.Retry.At):
		d.Action = ActionWait
		d.Wait = backoffWait(ev, "destroy")
	case NeedsDestroyPlan(ev):
		return decideDestroyPlan(ev, d)
	default:
		d.Action, d.Operation = ActionStart, infrav1.OperationDestroy
	}
	return d
}

// stateHold is the wait of an object whose state cannot be used: lost after it applied
// (I7), unreadable, of another lineage than the one the object wrote (LineageChanged), or a
// state it never wrote and has not adopted (RetainedState). Nothing runs against such a state.
func stateHold(ev Evidence) *Wait {
	switch {
	case ev.State.Read == StateAbsent && ev.State.AppliedBefore:
		return &Wait{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.StateLostReason, RequeueAfter: 10 * time.Minute,
			Message: "the object applied before but its Terraform state Secret is gone; nothing runs and the finalizer stays until " +
				"the state is restored (kubectl annotate <object> " + infrav1.RestoreStateAnnotation + "=<serial of status.stateBackups>) " +
				"or an override group member abandons the infrastructure (kubectl annotate <object> " + infrav1.AbandonInfrastructureAnnotation +
				"=<object UID>); see docs/state.md"}
	case ev.State.Read == StateUnreadable && ev.State.Problem != nil:
		return &Wait{ConditionType: infrav1.StateReadableCondition, Reason: ev.State.Problem.Reason, RequeueAfter: 10 * time.Minute,
			Message: ev.State.Problem.Message + "; nothing runs against this state until it reads again or is restored (see docs/state.md)"}
	case LineageChanged(ev):
		return &Wait{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.StateLineageChangedReason, RequeueAfter: 10 * time.Minute,
			Message: fmt.Sprintf("the state has lineage %s, but this object's state has lineage %s (annotation %s) and no restore explains the change: "+
				"the state was replaced, for example by a module that wrote another state; nothing runs against it. Restore the newest backup of lineage %s "+
				"(kubectl annotate <object> %s=<serial of status.stateBackups>); if the restore is refused because the replaced state still tracks "+
				"resources, keep a copy of it, delete the state Secret and restore again (see docs/state.md)",
				ev.State.Lineage, ev.State.OwnLineage, infrav1.StateLineageAnnotation, ev.State.OwnLineage, infrav1.RestoreStateAnnotation)}
	case RetainedState(ev):
		return &Wait{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.RetainedStateFoundReason, RequeueAfter: 10 * time.Minute,
			Message: fmt.Sprintf("the object never wrote a state, but a state of lineage %s exists (kept by a Retain deletion or an abandon, or left by "+
				"another object of this name); nothing runs against it. To take it over, an override group member sets "+
				"kubectl annotate <object> %s=%s; otherwise delete this object (the state is left as it is) or remove that state first (see docs/state.md)",
				ev.State.Lineage, infrav1.AdoptStateAnnotation, ev.State.Lineage)}
	}
	return nil
}

// RetainedState reports a state the object never wrote and has not adopted: the state is
// present, the object never wrote one (no own lineage), never applied nor destroyed, and the adopt
// annotation does not name the state's lineage. Nothing runs against it: a live object holds
// (RetainedStateFound), a deleting one goes without touching it.
func RetainedState(ev Evidence) bool {
	return ev.State.Read == StatePresent && ev.State.OwnLineage == "" && !ev.State.FirstRun && !ev.State.AppliedBefore && !ev.Object.Destroyed &&
		ev.State.Lineage != ev.State.AdoptLineage
}

// LineageChanged reports a state whose lineage is not the one the object wrote, adopted or
// restored: replaced outside a restore (a restore requested is decided before any hold).
func LineageChanged(ev Evidence) bool {
	return ev.State.Read == StatePresent && ev.State.OwnLineage != "" && ev.State.Lineage != ev.State.OwnLineage
}

// decideRestore decides a requested restore: start it when the serial is a backup of this
// object whose lineage fits the state; refuse (without retrying) otherwise.
func decideRestore(ev Evidence, d Decision) Decision {
	refuse := func(msg string) Decision {
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.RestoreJobSucceededCondition, Reason: infrav1.RestoreRefusedReason, Message: msg}
		return d
	}
	if ev.State.RestoreSerial == ev.State.RestoreFailed {
		return refuse("the restore of serial " + ev.State.RestoreSerial + " failed and is not tried again; name another serial, or remove the annotation " +
			infrav1.RestoreStateAnnotation)
	}
	var backup *BackupView
	for i := range ev.State.Backups {
		if fmt.Sprint(ev.State.Backups[i].Serial) == ev.State.RestoreSerial {
			backup = &ev.State.Backups[i]
		}
	}
	if backup == nil {
		if v := ReplicaRestore(ev); v != nil {
			// A version of the object's own lineage the replica store holds: back as a backup
			// first, and the next pass restores it like any backup.
			d.Action, d.Import = ActionImportReplica, v
			return d
		}
		msg := "serial " + ev.State.RestoreSerial + " is not a backup of this object; its backups are listed in status.stateBackups"
		switch r := ev.State.Replica; {
		case r != nil && r.Requested != nil && r.Requested.Unopened != "":
			msg += "; the replica store holds it, but this manager cannot read it: " + r.Requested.Unopened
		case r != nil && r.Problem != "":
			msg += "; the replica store could not be read for it: " + r.Problem + " (the next pass looks again)"
			d.Action = ActionWait
			d.Wait = &Wait{ConditionType: infrav1.RestoreJobSucceededCondition, Reason: infrav1.RestoreRefusedReason, RequeueAfter: time.Minute, Message: msg}
			return d
		case r != nil:
			msg += ", and the replica store holds no version of lineage " + RestoreLineage(ev) + " with that serial"
		}
		return refuse(msg)
	}
	switch {
	case ev.State.Read == StateNotRead:
		d.Action = ActionWait
		d.Wait = &Wait{Reason: infrav1.CacheLagReason, RequeueAfter: LagRequeue, Message: "the state was not read; no restore starts without it"}
		return d
	case ev.State.OwnLineage != "" && backup.Lineage != ev.State.OwnLineage:
		// A restore brings the object's own lineage back (the way out of StateLineageChanged,
		// whatever lineage the state has now), never another one.
		return refuse(fmt.Sprintf("backup %s has lineage %s, but this object's state has lineage %s (annotation %s): it is another state's backup",
			backup.Name, backup.Lineage, ev.State.OwnLineage, infrav1.StateLineageAnnotation))
	case ev.State.OwnLineage == "" && ev.State.Read == StatePresent && ev.State.Lineage != backup.Lineage:
		return refuse(fmt.Sprintf("backup %s has lineage %s, but the state has lineage %s: it is another state's backup", backup.Name, backup.Lineage, ev.State.Lineage))
	}
	d.Action, d.Operation = ActionStart, infrav1.OperationRestore
	return d
}

func joinMax(names []string, most int) string {
	out := ""
	for i, n := range names {
		if i == most {
			out += ", ..."
			break
		}
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// backoffWait keeps the failure visible while a retry waits: the condition stays False with the
// reason JobFailed and the runner's message, plus when the retry comes.
func backoffWait(ev Evidence, what string) *Wait {
	msg := "the last " + what + " failed"
	if ev.Retry.LastError != "" {
		msg += ": " + ev.Retry.LastError
	}
	return &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.JobFailedReason,
		Message:      msg + " (retrying at " + ev.Retry.At.UTC().Format(time.RFC3339) + ")",
		RequeueAfter: ev.Retry.At.Sub(ev.Now)}
}
