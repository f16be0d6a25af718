package engine

import (
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// JobPhase is what the cache (and, for finished Jobs, a live pod check) says of a Job.
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
}

// Evidence is everything a pass knows when it decides. Gathering it is the only part of a pass
// that reads; Decide is a pure function of it.
type Evidence struct {
	Now time.Time

	Deleting     bool
	HasFinalizer bool
	// Paused: the object's paused annotation or its Cluster's spec.paused.
	Paused bool
	// MoveDeletion: the object carries clusterctl's delete-for-move annotation.
	MoveDeletion bool
	BlockMove    bool
	// ActiveJob is status.activeJob.name ("" when unset).
	ActiveJob string

	// RunSeq is the object's durable run sequence; the Job of this sequence is Current.
	RunSeq int64
	// Current is the Job of RunSeq as the cache shows it (nil: not in the cache).
	Current *JobView
	// Running lists every running Job of the object in the cache (normally at most Current).
	Running []JobView

	// Lag is true when the cache-lag checks found a Job the cache does not show yet.
	Lag bool
	// LagChecked is true when the checks ran (they run only when their answer matters).
	LagChecked bool

	// DependencyWait, when set, is what the object waits for before it can apply.
	DependencyWait *Wait
	// InputsProblem, when set, is why the inputs cannot be assembled.
	InputsProblem *Problem
	DesiredHash   string
	AppliedHash   string

	// Children are machines and pools that still exist (a deleting cluster waits for them).
	Children []string
	// StateExists: the state Secret exists (read live, only when deleting).
	StateExists bool
	// Destroyed: a destroy Job of this object succeeded (durable annotation captf.io/destroyed).
	Destroyed bool

	// RetryAt is when a failed apply may be retried (zero: now), and LastError why it failed.
	RetryAt   time.Time
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

// Action is what a pass does after bookkeeping.
type Action string

// Actions.
const (
	// ActionWaitJob: a Job runs; keep block-move and activeJob, wait for the Job watch.
	ActionWaitJob Action = "WaitJob"
	// ActionWaitLag: the cache trails the API server; change nothing, requeue after 5 s.
	ActionWaitLag Action = "WaitLag"
	// ActionStart: start a Job of Operation.
	ActionStart Action = "Start"
	// ActionIdle: nothing to run.
	ActionIdle Action = "Idle"
	// ActionWait: blocked (dependency, inputs, backoff, children, paused deletion).
	ActionWait Action = "Wait"
	// ActionRemoveFinalizer: the object may go; remove the finalizer.
	ActionRemoveFinalizer Action = "RemoveFinalizer"
	// ActionCleanupAndRemoveFinalizer: destroy succeeded (or nothing was ever created): delete
	// state, inputs and leases, then remove the finalizer.
	ActionCleanupAndRemoveFinalizer Action = "CleanupAndRemoveFinalizer"
)

// Decision is the outcome of Decide.
type Decision struct {
	Action    Action
	Operation infrav1.Operation
	// SetBlockMove: write block-move if missing (normal passes while work may start).
	SetBlockMove bool
	// ClearBlockMove: remove block-move (only when paused or leaving, nothing runs, no lag).
	ClearBlockMove bool
	// ClearActiveJob: clear status.activeJob (nothing runs, no lag).
	ClearActiveJob bool
	// Wait explains ActionWait and ActionWaitLag.
	Wait *Wait
	// Problem, when set, becomes a False condition.
	Problem *Problem
}

// LagRequeue is how long a pass that saw cache lag waits before it looks again.
const LagRequeue = 5 * time.Second

// NeedsLagCheck reports whether the live cache-lag checks can change what this pass does:
// only when the pass would otherwise clear block-move or status.activeJob or drop the
// finalizer. An idle object reads nothing live.
func NeedsLagCheck(ev Evidence) bool {
	if len(ev.Running) > 0 {
		return false
	}
	wouldClearBlockMove := ev.BlockMove && (ev.Paused || ev.Deleting)
	return wouldClearBlockMove || ev.ActiveJob != "" || ev.Deleting
}

// Decide picks what a pass does. It is pure: same evidence, same decision.
func Decide(ev Evidence) Decision {
	// A running Job wins over everything: keep the marks and wait for its watch event.
	if len(ev.Running) > 0 {
		return Decision{Action: ActionWaitJob, SetBlockMove: !ev.BlockMove}
	}
	if ev.Lag {
		return Decision{Action: ActionWaitLag, Wait: &Wait{Reason: infrav1.CacheLagReason,
			Message: "a Job of this object exists on the API server but not yet in the cache", RequeueAfter: LagRequeue}}
	}
	// From here on nothing runs, as far as the cache and (when they ran) the live checks tell.
	clearActive := ev.ActiveJob != ""

	if ev.Deleting {
		return decideDeletion(ev, clearActive)
	}
	if ev.Paused {
		// Paused: start nothing, and let clusterctl move proceed.
		return Decision{Action: ActionWait, ClearBlockMove: ev.BlockMove, ClearActiveJob: clearActive,
			Wait: &Wait{ConditionType: infrav1.PausedCondition, Reason: infrav1.PausedReason, Message: "reconciliation is paused"}}
	}
	d := Decision{SetBlockMove: !ev.BlockMove, ClearActiveJob: clearActive}
	switch {
	case ev.DependencyWait != nil:
		d.Action, d.Wait = ActionWait, ev.DependencyWait
	case ev.InputsProblem != nil:
		d.Action, d.Problem = ActionWait, ev.InputsProblem
	case ev.DesiredHash != "" && ev.DesiredHash != ev.AppliedHash:
		if ev.Now.Before(ev.RetryAt) {
			d.Action = ActionWait
			d.Wait = backoffWait(ev, "apply")
			return d
		}
		d.Action, d.Operation = ActionStart, infrav1.OperationApply
	default:
		d.Action = ActionIdle
	}
	return d
}

func decideDeletion(ev Evidence, clearActive bool) Decision {
	if ev.MoveDeletion {
		// clusterctl move deletes the source objects after copying them: destroy nothing,
		// keep the state (it moved), let the object go.
		return Decision{Action: ActionRemoveFinalizer, ClearBlockMove: ev.BlockMove, ClearActiveJob: clearActive}
	}
	if ev.Paused {
		// A paused deletion waits: destroying now could race a move or a human's pause.
		return Decision{Action: ActionWait, ClearBlockMove: ev.BlockMove, ClearActiveJob: clearActive,
			Wait: &Wait{ConditionType: infrav1.DeletingCondition, Reason: infrav1.PausedReason,
				Message: "deletion waits: the object is paused, so nothing is destroyed until it is unpaused"}}
	}
	d := Decision{ClearActiveJob: clearActive, SetBlockMove: !ev.BlockMove}
	if len(ev.Children) > 0 {
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.DeletionBlockedCondition, Reason: infrav1.WaitingForMachinesReason,
			Message: "waiting for machines and pools to be deleted: " + joinMax(ev.Children, 5)}
		return d
	}
	if ev.Destroyed || !ev.StateExists {
		// The destroy succeeded, or no state was ever written: nothing is left to destroy.
		d.Action, d.SetBlockMove = ActionCleanupAndRemoveFinalizer, false
		d.ClearBlockMove = ev.BlockMove
		return d
	}
	if ev.Now.Before(ev.RetryAt) {
		d.Action = ActionWait
		d.Wait = backoffWait(ev, "destroy")
		return d
	}
	d.Action, d.Operation = ActionStart, infrav1.OperationDestroy
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
	if ev.LastError != "" {
		msg += ": " + ev.LastError
	}
	return &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.JobFailedReason,
		Message:      msg + " (retrying at " + ev.RetryAt.UTC().Format(time.RFC3339) + ")",
		RequeueAfter: ev.RetryAt.Sub(ev.Now)}
}
