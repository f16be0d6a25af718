package decide

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// settled is the evidence of an object with its finalizer, no Job in the cache, the live
// checks made where they were needed (and found nothing), and the decision inputs read.
func settled(ev Evidence) Evidence {
	ev.Object.HasFinalizer = true
	ev.Lag = LagView{Checked: NeedsLagCheck(ev)}
	ev.Inputs.Gathered = NeedsDecisionInputs(ev)
	if !NeedsLiveState(ev) && ev.State.Read != StateNotRead {
		ev.State.SecretCached = ev.State.Read != StateAbsent
	}
	return ev
}

// pendingJob makes the live checks of a settled evidence find a Job the run lease names that is
// not on the API server yet (cachelag's lease-inside-the-grace verdict).
func pendingJob(ev Evidence) Evidence {
	ev.Lag = LagView{Checked: true, Found: true, Pending: true, Job: "captf-x-4"}
	ev.Inputs.Gathered = NeedsDecisionInputs(ev)
	return ev
}

func TestDecideTable(t *testing.T) {
	running := []JobView{{Name: "captf-x-3", Seq: 3, Operation: infrav1.OperationApply, Phase: JobRunning}}
	finished := &JobView{Name: "captf-x-3", Seq: 3, Operation: infrav1.OperationApply, Phase: JobFinished}
	cases := []struct {
		name string
		ev   Evidence
		want Decision
	}{
		{"a new object gets its finalizer first",
			Evidence{Inputs: InputsEvidence{DesiredHash: "h1"}},
			Decision{Action: ActionAddFinalizer}},
		{"a deleting object without the finalizer is left alone",
			Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}},
			Decision{Action: ActionNone}},
		{"a running Job keeps the marks and waits",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3"}, Jobs: JobsEvidence{Running: running}},
			Decision{Action: ActionWaitJob}},
		{"a running Job restores a missing block-move and activeJob",
			Evidence{Object: ObjectEvidence{HasFinalizer: true}, Jobs: JobsEvidence{Running: running}},
			Decision{Action: ActionWaitJob, SetBlockMove: true, SetActiveJob: "captf-x-3"}},
		{"a Job of an earlier run the lagging cache shows running never takes status.activeJob from the current run's Job (sim seed 111)",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-4"}, Jobs: JobsEvidence{Running: running, RunSeq: 4}},
			Decision{Action: ActionWaitJob}},
		{"a running Job of an earlier run names status.activeJob when it names none",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true}, Jobs: JobsEvidence{Running: running, RunSeq: 4}},
			Decision{Action: ActionWaitJob, SetActiveJob: "captf-x-3"}},
		{"a running Job of a paused, deleting object still keeps the marks",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, Paused: true, Deleting: true, BlockMove: true, ActiveJob: "captf-x-3"}, Jobs: JobsEvidence{Running: running}},
			Decision{Action: ActionWaitJob}},
		{"a finished Job whose pod still runs keeps the marks",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, ActiveJob: "captf-x-3"}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsRunning}},
			Decision{Action: ActionWaitJob, SetBlockMove: true}},
		{"a finished Job whose pods were not listed is not counted",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true}, Jobs: JobsEvidence{Current: finished}},
			Decision{Action: ActionWaitJob}},
		{"a finished Job with terminal pods is counted, clearing its own activeJob",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3"}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsTerminal}},
			Decision{Action: ActionBookkeep, Operation: infrav1.OperationApply, ClearActiveJob: true}},
		{"counting a Job leaves an activeJob naming another Job alone",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-2"}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsTerminal}},
			Decision{Action: ActionBookkeep, Operation: infrav1.OperationApply}},
		{"lag found changes nothing",
			Evidence{Lag: LagView{Checked: true, Found: true}, Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3", Paused: true}},
			Decision{Action: ActionWaitLag}},
		{"a Job the run lease names that may still be created keeps block-move of a paused object (seed 1495)",
			pendingJob(settled(Evidence{Object: ObjectEvidence{Paused: true, BlockMove: true}})),
			Decision{Action: ActionWaitLag}},
		{"a Job the run lease names that may still be created keeps the finalizer of a move deletion",
			pendingJob(settled(Evidence{Object: ObjectEvidence{Deleting: true, Paused: true, MoveDeletion: true, BlockMove: true}})),
			Decision{Action: ActionWaitLag}},
		{"a Job the run lease names that may still be created does not hold up the destroy under that lease (seed 1499)",
			pendingJob(settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, ActiveJob: "captf-x-2"}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}})),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"a clear without the live checks waits instead",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3", Paused: true}},
			Decision{Action: ActionWaitLag}},
		{"paused and idle clears block-move and activeJob",
			settled(Evidence{Object: ObjectEvidence{Paused: true, BlockMove: true, ActiveJob: "captf-x-3"}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}}),
			Decision{Action: ActionWait, ClearBlockMove: true, ClearActiveJob: true}},
		{"changed inputs start an apply and set block-move",
			settled(Evidence{Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, SetBlockMove: true}},
		{"changed inputs after a finished Job clear its activeJob and start",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true, ActiveJob: "captf-x-2"}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, ClearActiveJob: true}},
		{"unchanged inputs stay idle, keeping block-move",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true, Provisioned: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}}),
			Decision{Action: ActionIdle}},
		{"a lost status is rebuilt from the state without a Job",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}}),
			Decision{Action: ActionRecoverStatus}},
		{"decision inputs not read: nothing starts",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}},
			Decision{Action: ActionWait}},
		{"a failed apply backs off",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, Retry: RetryEvidence{At: now.Add(time.Minute)}}),
			Decision{Action: ActionWait}},
		{"backoff over: apply again",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, Retry: RetryEvidence{At: now.Add(-time.Second)}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a dependency wait starts nothing",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", DependencyWait: &Wait{Reason: infrav1.WaitingForClusterInfrastructureReason}}}),
			Decision{Action: ActionWait}},
		{"bad inputs start nothing",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{Problem: &Problem{Reason: infrav1.InputsTooLargeReason}}}),
			Decision{Action: ActionWait}},
		{"deleting with state destroys",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"deleting cluster waits for its machines",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, Inputs: InputsEvidence{Children: []string{"TerraformMachine/m1"}}, State: StateEvidence{Read: StatePresent}}),
			Decision{Action: ActionWait}},
		{"destroyed and the state empty: clean up and let go",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, Destroyed: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, Empty: true}}),
			Decision{Action: ActionCleanup, ClearBlockMove: true}},
		{"destroyed but the state still lists resources: hold",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, Destroyed: true, BlockMove: true}, State: StateEvidence{Read: StatePresent}}),
			Decision{Action: ActionWait}},
		{"never applied and no state: let go without a destroy",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StateAbsent}}),
			Decision{Action: ActionCleanup, ClearBlockMove: true}},
		{"applied before and the state is lost: a deletion holds the finalizer (I7)",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, Inputs: InputsEvidence{AppliedHash: "h1"}, State: StateEvidence{Read: StateAbsent, AppliedBefore: true}}),
			Decision{Action: ActionWait}},
		{"an unreadable state holds a deletion",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StateUnreadable, Problem: &Problem{Reason: infrav1.StateCorruptReason}, AppliedBefore: true}}),
			Decision{Action: ActionWait}},
		{"deletionPolicy Retain lets go without a destroy",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, DeletionPolicy: infrav1.DeletionPolicyRetain}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionRetain, ClearBlockMove: true}},
		{"an audited abandon lets a lost state go",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, Abandon: true}, State: StateEvidence{Read: StateAbsent, AppliedBefore: true}}),
			Decision{Action: ActionAbandon, ClearBlockMove: true}},
		{"an abandon set after the deletion began lets a readable state go",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, Abandon: true}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionAbandon, ClearBlockMove: true}},
		{"an abandon set before the deletion, on a lost state, still lets it go (the hold is why it was set)",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, Abandon: true, AbandonPredates: true}, State: StateEvidence{Read: StateAbsent, AppliedBefore: true}}),
			Decision{Action: ActionAbandon, ClearBlockMove: true}},
		{"an abandon set before the deletion, on a readable state, is voided and the destroy runs",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true, Abandon: true, AbandonPredates: true}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy, VoidAbandon: "void"}},
		{"a dormant abandon on a healthy object is voided, and the pass goes on",
			settled(Evidence{Object: ObjectEvidence{Provisioned: true, BlockMove: true, Abandon: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StatePresent}}),
			Decision{Action: ActionIdle, VoidAbandon: "void"}},
		{"a dormant abandon on a never-applied object is voided as its apply starts",
			settled(Evidence{Object: ObjectEvidence{Abandon: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, SetBlockMove: true, VoidAbandon: "void"}},
		{"an abandon on an object its lost state holds stays",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true, Abandon: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StateAbsent}}),
			Decision{Action: ActionWait}},
		{"an abandon on an object whose state cannot be read stays",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true, Abandon: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateUnreadable, Problem: &Problem{Reason: infrav1.StateCorruptReason}},
			}),
			Decision{Action: ActionWait}},
		{"an abandon is not judged before the state was read",
			settled(Evidence{Object: ObjectEvidence{Provisioned: true, BlockMove: true, Abandon: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, SecretCached: true}}),
			Decision{Action: ActionIdle}},
		{"a paused object keeps its abandon until it is unpaused",
			settled(Evidence{Object: ObjectEvidence{Paused: true, BlockMove: true, Abandon: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StatePresent}}),
			Decision{Action: ActionWait, ClearBlockMove: true}},
		{"an abandon is not judged while a Job runs",
			Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3", Abandon: true}, Jobs: JobsEvidence{Running: running}, Inputs: InputsEvidence{Gathered: true}, State: StateEvidence{Read: StatePresent}},
			Decision{Action: ActionWaitJob}},
		{"a paused move deletion never destroys",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, MoveDeletion: true, Paused: true, BlockMove: true}, State: StateEvidence{Read: StatePresent}}),
			Decision{Action: ActionRemoveFinalizer, ClearBlockMove: true}},
		{"the source copy of a move, its annotations replaced by clusterctl, never counts its last Job again",
			settled(Evidence{Object: ObjectEvidence{Paused: true, MoveDeletion: true}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsTerminal}}),
			Decision{Action: ActionWait}},
		{"nor once clusterctl deleted it: it lets go",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, Paused: true, MoveDeletion: true}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsTerminal}, State: StateEvidence{Read: StatePresent}}),
			Decision{Action: ActionRemoveFinalizer}},
		{"the source copy of a move still waits for the pods of its last Job",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, Paused: true, MoveDeletion: true, BlockMove: true}, Jobs: JobsEvidence{Current: finished, CurrentPods: PodsRunning}}),
			Decision{Action: ActionWaitJob}},
		{"a paused Job's due backup waits while the object is paused",
			settled(Evidence{Object: ObjectEvidence{Paused: true, BlockMove: true}, State: StateEvidence{BackupDue: "captf-x-2"}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}}),
			Decision{Action: ActionWait, ClearBlockMove: true}},
		{"unpaused, the due backup comes before the apply the inputs want",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, State: StateEvidence{BackupDue: "captf-x-2", Read: StatePresent}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}}),
			Decision{Action: ActionBackup}},
		{"and before a restore",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, State: StateEvidence{BackupDue: "captf-x-2", Read: StatePresent, RestoreSerial: "1",
				Backups: []BackupView{{Name: "b1", Serial: 1}}}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}}),
			Decision{Action: ActionBackup}},
		{"and before a destroy",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{BackupDue: "captf-x-2", Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionBackup}},
		{"a move annotation without a pause is an ordinary deletion",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, MoveDeletion: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"a paused deletion never destroys",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, Paused: true, BlockMove: true}, State: StateEvidence{Read: StatePresent}}),
			Decision{Action: ActionWait, ClearBlockMove: true}},
		{"a failed destroy backs off",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, AppliedBefore: true}, Retry: RetryEvidence{At: now.Add(time.Minute)}}),
			Decision{Action: ActionWait}},
		{"a lost state holds an input change (I7)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StateAbsent}}),
			Decision{Action: ActionWait}},
		{"a first apply needs no state",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a restore of a backup starts a Restore Job",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateAbsent, RestoreSerial: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRestore}},
		{"a restore over a present state of the same lineage starts",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent, Lineage: "L", RestoreSerial: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRestore}},
		{"a restore of another lineage is refused",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent, Lineage: "M", RestoreSerial: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionWait}},
		{"a restore of a serial that is no backup is refused",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateAbsent, RestoreSerial: "9", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionWait}},
		{"a restore before the state was read waits (the lineage check needs it)",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateNotRead, RestoreSerial: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionWait}},
		{"a failed restore is not tried again",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateAbsent, RestoreSerial: "3", RestoreFailed: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionWait}},
		{"a deleting object with a lost state can be restored",
			settled(Evidence{
				Object: ObjectEvidence{Deleting: true, BlockMove: true},
				State:  StateEvidence{AppliedBefore: true, Read: StateAbsent, RestoreSerial: "3", Backups: []BackupView{{Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRestore}},
		{"a drift check runs when due, against the state read",
			settled(Evidence{
				Object: ObjectEvidence{Provisioned: true, BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Drift:  DriftEvidence{DueAt: now.Add(-time.Second)},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"an idle object wakes up when its drift check is due",
			settled(Evidence{
				Object: ObjectEvidence{Provisioned: true, BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, SecretCached: true},
				Drift:  DriftEvidence{DueAt: now.Add(time.Minute)},
			}),
			Decision{Action: ActionIdle}},
		{"no drift check against a lost state (I7)",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StateAbsent},
				Drift:  DriftEvidence{DueAt: now.Add(-time.Second)},
			}),
			Decision{Action: ActionWait}},
		{"drift found in Remediate mode: one apply of the last inputs",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Drift:  DriftEvidence{Remediate: "captf-x-4", Mode: infrav1.DriftModeRemediate},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a remediation waits out the apply backoff",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Drift:  DriftEvidence{Remediate: "captf-x-4", Mode: infrav1.DriftModeRemediate},
				Retry:  RetryEvidence{At: now.Add(time.Minute)},
			}),
			Decision{Action: ActionWait}},
		{"drift found in Report mode applies nothing",
			settled(Evidence{
				Object: ObjectEvidence{Provisioned: true, BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, SecretCached: true},
				Drift:  DriftEvidence{Remediate: "captf-x-4", Mode: infrav1.DriftModeReport},
			}),
			Decision{Action: ActionIdle}},
		{"drift found in Accept mode: one refresh, no apply",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Drift:  DriftEvidence{Remediate: "captf-x-4", Mode: infrav1.DriftModeAccept},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRefresh}},
		{"a refresh asked for runs after the apply the inputs want, never before it",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StatePresent}, Drift: DriftEvidence{RefreshRequest: "r1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a refresh asked for runs once the inputs are applied",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StatePresent}, Drift: DriftEvidence{RefreshRequest: "r1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRefresh}},
		{"a refresh waits for the state to be read (I7)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StateNotRead}, Drift: DriftEvidence{RefreshRequest: "r1"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.CacheLagReason}}},
		{"a refresh never runs against a lost state: the StateLost hold comes first",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, Read: StateAbsent}, Drift: DriftEvidence{RefreshRequest: "r1"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLostReason}}},
		{"a refresh asked for on an object that never applied waits for its first apply",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}, Drift: DriftEvidence{RefreshRequest: "r1"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a refresh waits out a backoff",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Drift:  DriftEvidence{RefreshRequest: "r1"},
				Retry:  RetryEvidence{At: now.Add(time.Minute)},
			}),
			Decision{Action: ActionWait}},
		{"under applyPolicy Manual a refresh first makes a refresh-only plan",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Plan:   PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual},
				Drift:  DriftEvidence{RefreshRequest: "r1"},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan, RefreshOnly: true}},
		{"under applyPolicy Manual a pending refresh-only plan waits for approval",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Plan:   PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h1", RefreshOnly: true, Update: 1}},
				Drift:  DriftEvidence{RefreshRequest: "r1"},
			}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.PlanAwaitingApprovalReason}}},
		{"under applyPolicy Manual the approved refresh-only plan is applied by a refresh",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Plan:   PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h1", RefreshOnly: true, Update: 1}, Approved: "p1"},
				Drift:  DriftEvidence{RefreshRequest: "r1"},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRefresh, PlanID: "p1"}},
		{"an apply never runs a pending refresh-only plan, even approved: it plans anew",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, Read: StatePresent},
				Plan:   PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h2", RefreshOnly: true, Update: 1}, Approved: "p1"},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationPlan}},
		{"a new object that finds a state it never wrote holds (RetainedStateFound) and starts nothing",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StatePresent, Lineage: "R"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RetainedStateFoundReason}}},
		{"a state found after the object's own first run started against no state is its own, though that run was never counted",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StatePresent, Lineage: "R", FirstRun: true}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"the adopt opt-in naming the state's lineage lets a new object apply on top of it",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StatePresent, Lineage: "R", AdoptLineage: "R"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"an adopt opt-in naming another lineage adopts nothing",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StatePresent, Lineage: "R", AdoptLineage: "X"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RetainedStateFoundReason}}},
		{"a new object with no state, whose name the replica store holds a state of that tracks resources for, holds (ReplicaStateFound)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7}}}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.ReplicaStateFoundReason}}},
		{"a replica whose newest version is empty (destroyed) holds nothing: the first apply runs",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 9, Empty: true}}}}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a store that cannot be listed holds no first apply (best effort)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, Replica: &ReplicaLookup{Problem: "connection refused"}}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"the adopt opt-in naming the replica's lineage brings its newest version back",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, AdoptLineage: "R", Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "Q", Serial: 3}, {Lineage: "R", Serial: 7}}}}}),
			Decision{Action: ActionImportReplica}},
		{"an adopted replica version this manager cannot read is never brought back: the object holds",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, AdoptLineage: "R", Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7, Unopened: "wrong key"}}}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.ReplicaStateFoundReason}}},
		{"an adopt opt-in naming another lineage brings nothing back",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1"},
				State: StateEvidence{Read: StateAbsent, AdoptLineage: "X", Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7}}}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.ReplicaStateFoundReason}}},
		{"a deleting new object whose name the replica holds a state for goes: nothing was created here",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true},
				State: StateEvidence{Read: StateAbsent, AdoptLineage: "R", Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7}}}}}),
			Decision{Action: ActionCleanup, ClearBlockMove: true}},
		{"a restore of a serial no backup has, which the replica store holds in the object's own lineage, brings it back first",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L", Backups: []BackupView{{Name: "b5", Serial: 5, Lineage: "L"}},
					RestoreSerial: "9", Replica: &ReplicaLookup{Requested: &ReplicaVersionView{Lineage: "L", Serial: 9}}}}),
			Decision{Action: ActionImportReplica}},
		{"a restore of a serial neither a backup nor in the replica store is refused",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L", RestoreSerial: "9", Replica: &ReplicaLookup{}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RestoreRefusedReason}}},
		{"a restore of a store version this manager cannot read is refused",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L", RestoreSerial: "9",
					Replica: &ReplicaLookup{Requested: &ReplicaVersionView{Lineage: "L", Serial: 9, Unopened: "wrong key"}}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RestoreRefusedReason}}},
		{"a restore never brings another lineage back from the store",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L", RestoreSerial: "9",
					Replica: &ReplicaLookup{Requested: &ReplicaVersionView{Lineage: "M", Serial: 9}}}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RestoreRefusedReason}}},
		{"a deleting new object leaves a state it never wrote as it is, destroying nothing",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, Lineage: "R"}}),
			Decision{Action: ActionLeaveState, ClearBlockMove: true}},
		{"a deleting new object that adopted the state destroys it",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{Read: StatePresent, Lineage: "R", AdoptLineage: "R"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"an object that wrote its state applies on it",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L"}}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a state whose lineage changed outside a restore holds an apply (StateLineageChanged)",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "M"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLineageChangedReason}}},
		{"a state whose lineage changed holds a drift check",
			settled(Evidence{
				Object: ObjectEvidence{Provisioned: true, BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "M"},
				Drift:  DriftEvidence{DueAt: now.Add(-time.Second)},
			}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLineageChangedReason}}},
		{"a state whose lineage changed holds a deletion: nothing destroys another lineage",
			settled(Evidence{Object: ObjectEvidence{Deleting: true, BlockMove: true}, State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "M"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLineageChangedReason}}},
		{"the adopt opt-in does not release an object whose lineage changed",
			settled(Evidence{Object: ObjectEvidence{BlockMove: true}, Inputs: InputsEvidence{DesiredHash: "h2", AppliedHash: "h1"}, State: StateEvidence{AppliedBefore: true, OwnLineage: "L", AdoptLineage: "M", Read: StatePresent, Lineage: "M"}}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLineageChangedReason}}},
		{"a restore of a backup of the object's own lineage releases a changed lineage",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "M", RestoreSerial: "3", Backups: []BackupView{{Name: "b4", Serial: 4, Lineage: "M"}, {Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRestore}},
		{"a restore of a backup of the replacing lineage is refused",
			settled(Evidence{
				Object: ObjectEvidence{BlockMove: true},
				Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
				State:  StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "M", RestoreSerial: "4", Backups: []BackupView{{Name: "b4", Serial: 4, Lineage: "M"}, {Name: "b3", Serial: 3, Lineage: "L"}}},
			}),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.RestoreRefusedReason}}},
		{"another incarnation's finished Job is skipped, never counted",
			Evidence{
				Object: ObjectEvidence{HasFinalizer: true, BlockMove: true},
				Jobs:   JobsEvidence{Current: &JobView{Name: "captf-x-3", Seq: 3, Operation: infrav1.OperationDestroy, Phase: JobFinished, Foreign: true}, CurrentPods: PodsTerminal},
			},
			Decision{Action: ActionSkipRun}},
		{"another incarnation's running Job blocks and keeps the marks",
			Evidence{Object: ObjectEvidence{HasFinalizer: true}, Jobs: JobsEvidence{Running: []JobView{{Name: "captf-x-1", Seq: 1, Operation: infrav1.OperationDestroy, Phase: JobRunning, Foreign: true}}}},
			Decision{Action: ActionWaitJob, SetBlockMove: true, SetActiveJob: "captf-x-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Now = now
			got := Decide(tc.ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation ||
				got.SetBlockMove != tc.want.SetBlockMove || got.ClearBlockMove != tc.want.ClearBlockMove ||
				got.ClearActiveJob != tc.want.ClearActiveJob || got.SetActiveJob != tc.want.SetActiveJob ||
				(got.VoidAbandon != "") != (tc.want.VoidAbandon != "") || got.RefreshOnly != tc.want.RefreshOnly || got.PlanID != tc.want.PlanID ||
				(tc.want.Wait != nil && (got.Wait == nil || got.Wait.Reason != tc.want.Wait.Reason)) {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// space enumerates the full evidence space Decide can see and calls visit with each
// combination, from the workers goroutines at once; visit gets the worker's index (0 to
// workers-1), so each worker can keep its own tally without a lock.
// The dimensions: finalizer, deleting, paused, move annotation, block-move, provisioned,
// status.activeJob (none, the current Job, another), the Jobs (none; another running; the
// current one running, of this or another incarnation; finished, of this or another
// incarnation, with its pods not listed, running or terminal), the lag checks (not made, made
// and clean, made and lag found), whether the decision inputs were read, dependency wait /
// inputs problem / neither, the inputs hashes (unchanged, changed, never applied), children,
// the state (not read, absent, present and empty, present with resources, unreadable),
// destroyed, backoff, deletion policy, abandon (none; set after the deletion began or on a
// live object; proven set before the deletion began), and backups and restore (none; a backup; a
// backup and its restore; a backup whose restore failed; a restore without a backup). The state
// dimension also carries its identity: the object's own lineage is L when it wrote a state,
// and the state is L, or M (another lineage) with or without the adopt opt-in naming it. Each
// combination is an index in a mixed-radix counter. Drift: off, not due, due, a remediation
// pending, drift to accept with a refresh asked for too, a refresh asked for under
// applyPolicy Manual with its refresh-only plan approved, a check asked for now
// (captf.io/drift-check) while the schedule says it is not due. (An inputs problem, a restore without a backup and an activeJob naming another Job
// are in the table: they take the same branches as a dependency wait, a refused restore and
// an unset activeJob.)
func space(workers int, visit func(worker int, ev Evidence) (more bool)) {
	actives := []string{"", "j3"}
	type jobs struct {
		current *JobView
		running []JobView
		pods    PodsView
		// A running Job whose pod cannot start: its start block or pull failure, and whether
		// its pods prove that terraform never started (read live while it is unready).
		block        *StartBlock
		pull         *PullFailure
		neverStarted bool
	}
	own := func(ph JobPhase, foreign bool) *JobView {
		return &JobView{Name: "j3", Seq: 3, Operation: infrav1.OperationApply, Phase: ph, Foreign: foreign}
	}
	unready := func() *JobView { v := own(JobRunning, false); v.Unready = true; return v }
	other := []JobView{{Name: "j2", Seq: 2, Operation: infrav1.OperationApply, Phase: JobRunning}}
	configError := &StartBlock{Pod: "j3-p", Container: "terraform", Reason: "CreateContainerConfigError", Since: now, Immediate: true}
	jobSets := []jobs{{}, {running: other}, {current: own(JobRunning, false), running: []JobView{*own(JobRunning, false)}},
		{current: own(JobRunning, true), running: []JobView{*own(JobRunning, true)}},
		{current: unready(), running: []JobView{*unready()}, block: configError, neverStarted: true},
		{current: unready(), running: []JobView{*unready()}, block: configError},
		{current: unready(), running: []JobView{*unready()}, pull: &PullFailure{Pod: "j3-p", Reason: "ImagePullBackOff"}, neverStarted: true}}
	for _, foreign := range []bool{false, true} {
		for _, pods := range []PodsView{PodsNotListed, PodsRunning, PodsTerminal} {
			jobSets = append(jobSets, jobs{current: own(JobFinished, foreign), pods: pods})
		}
	}
	lags := []LagView{{}, {Checked: true}, {Checked: true, Found: true, Job: "j9"}, {Checked: true, Found: true, Pending: true, Job: "j9"}}
	type inputs struct {
		dep     *Wait
		problem *Problem
	}
	inputSets := []inputs{{}, {dep: &Wait{Reason: infrav1.WaitingForClusterReason}}}
	hashes := [][2]string{{"h1", "h1"}, {"h2", "h1"}, {"h1", ""}}
	// The state read, with its lineage and the adopt opt-in: the object's own lineage is L when
	// it wrote a state (an applied hash or a backup), else none; M is another state's lineage.
	type stateSet struct {
		view           StateView
		empty          bool
		lineage, adopt string
		// replica: what the replica store holds for the object's name (a rebuilt management
		// cluster), looked at when the state is absent.
		replica *ReplicaLookup
	}
	inStore := &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7}}}
	states := []stateSet{{StateNotRead, false, "", "", nil}, {StateAbsent, false, "", "", nil}, {StatePresent, true, "L", "", nil}, {StatePresent, false, "L", "", nil},
		{StateUnreadable, false, "", "", nil}, {StatePresent, false, "M", "", nil}, {StatePresent, false, "M", "M", nil},
		{StateAbsent, false, "", "", inStore}, {StateAbsent, false, "", "R", inStore}}
	unreadable := &Problem{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.StateCorruptReason}
	children := []string{"TerraformMachine/m1"}
	backup := []BackupView{{Name: "b5", Serial: 5, Lineage: "L"}}
	type restoreSet struct {
		backups        []BackupView
		serial, failed string
		// due: a mutating Job counted while paused left its backup due (BackupDue).
		due string
	}
	restores := []restoreSet{{}, {backups: backup}, {backups: backup, serial: "5"}, {backups: backup, serial: "5", failed: "5"},
		{backups: backup, serial: "5", due: "captf-x-2"}}
	// Drift checks and refreshes: a check due or not, drift to remediate or to accept, a
	// refresh asked for; under applyPolicy Manual with the refresh-only plan approved.
	type driftSet struct {
		due       time.Time
		remediate string
		mode      infrav1.DriftMode
		refresh   string
		manual    bool
		check     string
		// A destroy judged like an apply: 1, applyPolicy Manual with a destroy plan that
		// waits for approval; 2, a plan policy selects the object and its destroy plan breaks
		// a rule but is approved. The refresh set under Manual also carries the override
		// groups' break-glass annotation (destroy-without-plan), which only a deletion reads.
		destroy int
		// A targeted operation asked for (captf.io/target-operation): target is its value;
		// targetPlan 1: under applyPolicy Manual, with its plan approved.
		target     string
		targetPlan int
	}
	// Targeted operations ride sets that test something else where that costs no coverage
	// (each set multiplies the space): a replace on a check not due yet (an apply of its own),
	// a replace under Manual beside a destroy plan (a plan of its own: a destroy plan is none of
	// the apply's), a request that cannot be read beside the policy's destroy plan (a wait); and
	// one set of its own, an import under Manual whose plan was approved.
	drifts := []driftSet{{}, {due: now.Add(time.Minute), target: "replace a.b"}, {due: now.Add(-time.Second)}, {remediate: "j1", mode: infrav1.DriftModeRemediate},
		{remediate: "j1", mode: infrav1.DriftModeAccept, refresh: "r1"}, {refresh: "r1", manual: true}, {due: now.Add(time.Minute), check: "c1"},
		{destroy: 1, target: "replace a.b"}, {destroy: 2, target: "nonsense"}, {target: "import a.b i-1", targetPlan: 1}}
	refreshPlan := &infrav1.PlanRecord{ID: "p1", InputsHash: "h1", Serial: 0, RefreshOnly: true}
	destroyPlan := &infrav1.PlanRecord{ID: "p2", InputsHash: "h1", Serial: 0, Lineage: "L", Destroy: true, Delete: 1}
	// Each set's request, read once (not once per combination).
	targets := make([]TargetEvidence, len(drifts))
	for i, dr := range drifts {
		if dr.target != "" {
			targets[i] = targetEvidence(map[string]string{infrav1.TargetOperationAnnotation: dr.target})
		}
	}
	targetPlan := &infrav1.PlanRecord{ID: "p4", InputsHash: "h1", Serial: 0, Lineage: "L", Target: "import a.b i-1", Create: 1}
	violatedDestroyPlan := &infrav1.PlanRecord{ID: "p3", InputsHash: "h1", Serial: 0, Lineage: "L", Destroy: true, Delete: 2, Violations: []string{"no-db-deletes/db: deletes a database"}}
	// finalizer, deleting, paused, move, block-move, provisioned, activeJob, jobs, lag,
	// gathered, inputs, hashes, children, state, destroyed, backoff, policy, abandon, restore.
	radix := []int{2, 2, 2, 2, 2, 2, len(actives), len(jobSets), len(lags), 2, len(inputSets), len(hashes), 2, len(states), 2, 2, 2, 3, len(restores), len(drifts)}
	total := 1
	for _, r := range radix {
		total *= r
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			digit := make([]int, len(radix))
			for n := w; n < total; n += workers {
				for i, rest := 0, n; i < len(radix); i++ {
					digit[i], rest = rest%radix[i], rest/radix[i]
				}
				on := func(i int) bool { return digit[i] == 1 }
				js, in, st, rs, dr := jobSets[digit[7]], inputSets[digit[10]], states[digit[13]], restores[digit[18]], drifts[digit[19]]
				ev := Evidence{
					Now:    now,
					Lag:    lags[digit[8]],
					Object: ObjectEvidence{HasFinalizer: on(0), Deleting: on(1), Paused: on(2), MoveDeletion: on(3), BlockMove: on(4), Provisioned: on(5), ActiveJob: actives[digit[6]], Destroyed: on(14), Abandon: digit[17] > 0, AbandonPredates: digit[17] == 2},
					Jobs: JobsEvidence{RunSeq: 3, Current: js.current, Running: js.running, CurrentPods: js.pods,
						StartBlock: js.block, PullFailure: js.pull, NeverStarted: js.neverStarted},
					Inputs: InputsEvidence{Gathered: on(9), DependencyWait: in.dep, Problem: in.problem, DesiredHash: hashes[digit[11]][0], AppliedHash: hashes[digit[11]][1]},
					State:  StateEvidence{Read: st.view, Empty: st.empty, Lineage: st.lineage, AdoptLineage: st.adopt, Replica: st.replica, Backups: rs.backups, RestoreSerial: rs.serial, RestoreFailed: rs.failed, BackupDue: rs.due},
					Drift:  DriftEvidence{DueAt: dr.due, Remediate: dr.remediate, Mode: dr.mode, RefreshRequest: dr.refresh, CheckRequest: dr.check},
				}
				ev.Target = targets[digit[19]]
				switch {
				case dr.targetPlan == 1:
					ev.Plan.ApplyPolicy, ev.Plan.Pending, ev.Plan.Approved = infrav1.ApplyPolicyManual, targetPlan, targetPlan.ID
				case dr.manual:
					ev.Plan.ApplyPolicy, ev.Plan.Pending, ev.Plan.Approved = infrav1.ApplyPolicyManual, refreshPlan, refreshPlan.ID
					ev.Object.DestroyWithoutPlan = true
				case dr.destroy == 1:
					ev.Plan.ApplyPolicy, ev.Plan.Pending = infrav1.ApplyPolicyManual, destroyPlan
				case dr.destroy == 2:
					ev.Plan.PolicySelected, ev.Plan.Pending, ev.Plan.Approved = true, violatedDestroyPlan, violatedDestroyPlan.ID
				}
				if on(12) {
					ev.Inputs.Children = children
				}
				if st.view == StateUnreadable {
					ev.State.Problem = unreadable
				}
				if on(15) {
					ev.Retry.At = now.Add(time.Minute)
				}
				if on(16) {
					ev.Object.DeletionPolicy = infrav1.DeletionPolicyRetain
				}
				if ev.Inputs.AppliedHash != "" || len(ev.State.Backups) > 0 {
					ev.State.OwnLineage = "L"
				}
				ev.State.AppliedBefore = ev.Inputs.AppliedHash != "" || ev.Object.Provisioned || len(ev.State.Backups) > 0 || ev.State.OwnLineage != ""
				ev.State.SecretCached = st.view != StateAbsent
				if !visit(w, ev) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// consistent reports evidence that gather can produce: pods listed exactly when NeedsPods,
// the lag checks made exactly when NeedsLagCheck, the decision inputs read exactly when
// NeedsDecisionInputs.
func consistent(ev Evidence) bool {
	if (ev.Jobs.CurrentPods != PodsNotListed) != NeedsPods(ev) || ev.Lag.Checked != NeedsLagCheck(ev) {
		return false
	}
	if (ev.Jobs.StartBlock != nil || ev.Jobs.PullFailure != nil || ev.Jobs.NeverStarted) && !NeedsPendingPods(ev) {
		return false
	}
	return ev.Inputs.Gathered == NeedsDecisionInputs(ev) && (ev.State.Read != StateNotRead) == NeedsLiveState(ev)
}

// violations checks one decision against the invariants (ARCHITECTURE.md I1-I4, I6 and the
// pause and move rules). It returns what the decision breaks.
func violations(ev Evidence, d Decision) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	cacheRuns := len(ev.Jobs.Running) > 0
	if !ev.Object.HasFinalizer && ev.Object.Deleting {
		// The API server is deleting the object: nothing the controller decides can hold it.
		if d.Action != ActionNone {
			bad("acts on an object that is gone")
		}
		return out
	}
	if !ev.Object.HasFinalizer && len(ev.Jobs.Running) > 0 && !ev.Object.BlockMove && !d.SetBlockMove {
		bad("I2: adds the finalizer but not block-move while a Job runs")
	}
	podsRun := len(ev.Jobs.Running) == 0 && ev.Jobs.Current != nil && ev.Jobs.Current.Phase == JobFinished && ev.Jobs.CurrentPods != PodsTerminal
	lagUnknown := NeedsLagCheck(ev) && (!ev.Lag.Checked || ev.Lag.Found && !ev.Lag.Pending)
	// A Job the run lease names that may still be created: a start under that lease may go on
	// (it takes the same lease, and adopts or creates that Job), but nothing the Job needs may go.
	pending := NeedsLagCheck(ev) && ev.Lag.Checked && ev.Lag.Pending
	startMayRun := cacheRuns || podsRun || lagUnknown
	mayRun := startMayRun || pending
	bookkeepsOwn := d.Action == ActionBookkeep && ev.Jobs.CurrentPods == PodsTerminal && ev.Object.ActiveJob == ev.Jobs.Current.Name

	if startMayRun && d.Action == ActionStart {
		bad("I1: starts a Job while one may run")
	}
	if d.Action == ActionDeleteJob && !(ev.Object.Deleting && cacheRuns && ev.Jobs.NeverStarted && (ev.Jobs.PullFailure != nil || StartBlocked(ev) != nil)) {
		bad("deletes a running Job outside a deletion, or one whose pods do not prove that terraform never started")
	}
	if d.Action == ActionWaitJob && ev.Object.Deleting && cacheRuns && ev.Jobs.NeverStarted && (ev.Jobs.PullFailure != nil || StartBlocked(ev) != nil) {
		bad("a deletion waits out the deadline of a Job that can never start and never ran terraform")
	}
	if (cacheRuns || podsRun) && ev.Object.HasFinalizer && (d.ClearBlockMove || !(ev.Object.BlockMove || d.SetBlockMove)) {
		bad("I2: a Job runs and block-move is not kept")
	}
	if mayRun && d.LetsGo() {
		bad("I3: drops the finalizer while a Job may run")
	}
	if ev.Jobs.Current != nil && ev.Jobs.Current.Foreign && d.Action == ActionBookkeep {
		bad("counts another incarnation's Job as its own")
	}
	if mayRun && d.ClearActiveJob {
		bad("I4: clears status.activeJob while a Job may run")
	}
	if mayRun && d.ClearBlockMove {
		bad("I2: clears block-move while a Job may run")
	}
	if d.Clears() && !(ev.Lag.Checked && !ev.Lag.Found) && !(bookkeepsOwn && !d.ClearBlockMove && d.Action == ActionBookkeep) {
		bad("a clear without live checks that found nothing")
	}
	if d.Action == ActionBookkeep && d.ClearActiveJob && !bookkeepsOwn {
		bad("I4: bookkeeping clears an activeJob other than the Job it counts")
	}
	if d.Action != ActionAddFinalizer && d.Action != ActionNone && !ev.Object.HasFinalizer {
		bad("acts on an object without its finalizer")
	}
	if d.Action == ActionStart && ev.Object.Paused {
		bad("a paused object starts a Job")
	}
	if d.Action == ActionStart && !ev.Inputs.Gathered {
		bad("starts a Job without its decision inputs")
	}
	if ev.Object.Deleting && d.Action == ActionStart && d.Operation != infrav1.OperationDestroy && d.Operation != infrav1.OperationRestore &&
		!(d.Operation == infrav1.OperationPlan && d.DestroyPlan) {
		bad("a deleting object starts %s", d.Operation)
	}
	// A destroy judged like an apply: an object that asks for its plans to be judged (or
	// whose destroy plan a verdict holds) destroys only through its pending destroy plan,
	// unchanged since it was judged, approved or let by; unless an override group member set
	// the break-glass annotation. A destroy plan is made only for such a deletion, and an
	// Apply never applies one.
	judged := !ev.Object.DestroyWithoutPlan && (ev.Plan.PolicySelected || ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual ||
		ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval ||
		ev.Plan.Pending != nil && ev.Plan.Pending.Destroy && (ev.Plan.Pending.Violated() || ev.Plan.Pending.IsCorrupt()))
	if d.Action == ActionStart && d.Operation == infrav1.OperationDestroy && d.PlanID == "" && judged {
		bad("destroys without the destroy plan the object asks to be judged")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationDestroy && d.PlanID != "" {
		p := ev.Plan.Pending
		switch {
		case p == nil || p.ID != d.PlanID || !p.Destroy:
			bad("a Destroy applies a plan that is not the pending destroy plan")
		case p.IsCorrupt() || p.Serial != ev.State.Serial || p.Lineage != "" && p.Lineage != ev.State.Lineage || p.ID == ev.Plan.Applied:
			bad("a Destroy applies a corrupt, superseded or spent destroy plan")
		case ev.Plan.Approved != p.ID && (p.Violated() || p.Changes() && (ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual ||
			ev.Plan.DestructiveChanges == infrav1.DestructiveChangesRequireApproval && p.Destructive())):
			bad("a Destroy applies a destroy plan that its policies hold or that waits for an approver")
		}
	}
	if d.Action == ActionStart && d.DestroyPlan && (!ev.Object.Deleting || d.Operation != infrav1.OperationPlan || d.RefreshOnly || !judged) {
		bad("makes a destroy plan outside a judged deletion")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationApply && d.PlanID != "" && ev.Plan.Pending != nil && ev.Plan.Pending.Destroy && d.PlanID == ev.Plan.Pending.ID {
		bad("applies a destroy plan as an apply")
	}
	if ev.Object.Deleting && ev.Object.Paused && d.Action == ActionStart {
		bad("I6: a paused deletion destroys")
	}
	if d.Action == ActionCleanup && !(ev.Inputs.Gathered && (ev.State.Read == StateAbsent && (!ev.State.AppliedBefore || ev.Object.Destroyed) || ev.State.Read == StatePresent && ev.Object.Destroyed && ev.State.Empty)) {
		bad("I6: state would be deleted without a successful destroy that left it empty")
	}
	if (d.Action == ActionCleanup || d.Action == ActionRetain || d.Action == ActionAbandon) && len(ev.Inputs.Children) > 0 {
		bad("a cluster deletion went ahead of its machines")
	}
	if d.LetsGo() && ev.Object.Deleting && ev.State.AppliedBefore && ev.State.Read == StateAbsent && !ev.Object.Destroyed &&
		d.Action != ActionAbandon && d.Action != ActionRetain && !(d.Action == ActionRemoveFinalizer && ev.Object.Paused && ev.Object.MoveDeletion) {
		bad("I7: lets go of a lost state without a restore or an audited abandon")
	}
	if d.Action == ActionStart && d.Operation != infrav1.OperationRestore && ev.State.AppliedBefore && ev.State.Read != StatePresent {
		bad("I7: runs %s against a missing or unread state of an object that applied before", d.Operation)
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationDestroy && ev.Object.DeletionPolicy == infrav1.DeletionPolicyRetain {
		bad("destroys although deletionPolicy is Retain")
	}
	if d.Action == ActionAbandon && !ev.Object.Abandon {
		bad("abandons without the audited annotation")
	}
	if d.Action == ActionAbandon && (!ev.Object.Deleting || ev.Object.AbandonPredates && stateHold(ev) == nil) {
		bad("a dormant abandon (set before the deletion began, on a state that does not hold the object) skips the destroy")
	}
	settledPass := ev.Object.HasFinalizer && !ev.Object.Paused && !mayRun && !(ev.Jobs.Current != nil && ev.Jobs.Current.Phase == JobFinished) &&
		ev.Inputs.Gathered && ev.State.Read != StateNotRead
	dormant := ev.Object.Abandon && stateHold(ev) == nil && (!ev.Object.Deleting || ev.Object.AbandonPredates)
	if d.VoidAbandon != "" && !(settledPass && dormant && !d.LetsGo()) {
		bad("voids an abandon that applies, or one it cannot judge yet (a Job may run, paused, or the state not read)")
	}
	if d.VoidAbandon == "" && settledPass && dormant && !d.LetsGo() {
		bad("keeps a dormant abandon")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationRestore && (ev.State.RestoreSerial == "" || ev.State.RestoreSerial == ev.State.RestoreFailed || len(ev.State.Backups) == 0) {
		bad("starts a restore nothing asks for, or one that failed before")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationRestore && ev.State.Read == StateNotRead {
		bad("I7: starts a restore before the state was read (its lineage is unchecked)")
	}
	// The backups around a move: a move's source copy counts no Job again (clusterctl replaced
	// its annotations, so its run sequence looks behind), and a backup a paused Job left due is
	// taken before any Job writes the state again, only by a pass that is not paused.
	if ev.Object.Paused && ev.Object.MoveDeletion && (d.Action == ActionBookkeep || d.Action == ActionSkipRun) {
		bad("counts a Job again on the source copy of a move")
	}
	if ev.State.BackupDue != "" && d.Action == ActionStart {
		bad("starts %s before the backup a paused Job left due", d.Operation)
	}
	if d.Action == ActionBackup && (ev.Object.Paused || startMayRun || ev.State.BackupDue == "" || !ev.Inputs.Gathered) {
		bad("takes a due backup while paused, while a Job may run, unread, or with none due")
	}
	if ev.Object.Deleting && ev.Object.MoveDeletion && !ev.Object.Paused && d.Action == ActionRemoveFinalizer {
		bad("an annotation alone skips the destroy")
	}
	if d.ClearBlockMove && !ev.Object.Paused && !ev.Object.Deleting {
		bad("block-move cleared in a normal pass")
	}
	if d.SetBlockMove && d.ClearBlockMove {
		bad("contradictory block-move decision")
	}
	// The state's identity: nothing but a restore runs against a state the object never wrote
	// and did not adopt, or against a state whose lineage changed; a restore brings back only
	// the object's own lineage; such a state is never deleted; a settled pass reports the hold.
	retained := ev.State.Read == StatePresent && ev.State.OwnLineage == "" && !ev.State.AppliedBefore && !ev.Object.Destroyed && ev.State.Lineage != ev.State.AdoptLineage
	changed := ev.State.Read == StatePresent && ev.State.OwnLineage != "" && ev.State.Lineage != ev.State.OwnLineage
	if d.Action == ActionStart && d.Operation != infrav1.OperationRestore && retained {
		bad("runs %s against a state it never wrote, without the adopt opt-in naming its lineage", d.Operation)
	}
	if d.Action == ActionStart && d.Operation != infrav1.OperationRestore && changed {
		bad("runs %s against a state whose lineage changed outside a restore", d.Operation)
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationRestore && ev.State.OwnLineage != "" {
		for _, b := range ev.State.Backups {
			if fmt.Sprint(b.Serial) == ev.State.RestoreSerial && b.Lineage != ev.State.OwnLineage {
				bad("restores a backup of lineage %s over an object whose own lineage is %s", b.Lineage, ev.State.OwnLineage)
			}
		}
	}
	if d.Action == ActionCleanup && retained {
		bad("I6: deletes a state the object never wrote")
	}
	if d.Action == ActionLeaveState && !(retained && ev.Object.Deleting) {
		bad("lets go without a destroy of a state that is not someone else's")
	}
	if settledPass && !ev.Object.Deleting && ev.State.RestoreSerial == "" && (retained || changed) &&
		(d.Action != ActionWait || d.Wait == nil || d.Wait.ConditionType != infrav1.StateReadableCondition) {
		bad("a state it never wrote or whose lineage changed does not hold the object (StateReadable)")
	}
	// Recovery from the replica store: nothing starts over a state the store holds for the
	// object's name that may track resources; a version comes back only on the adopt opt-in
	// naming its lineage, on a settled, live pass; otherwise a settled pass holds.
	found := ReplicaFound(ev)
	if d.Action == ActionStart && len(found) > 0 {
		bad("starts %s while the replica store holds a state of the object's name it has not brought back", d.Operation)
	}
	if d.Action == ActionImportReplica && (startMayRun || ev.Object.Paused || !ev.Inputs.Gathered || ev.State.Read != StateAbsent || ev.Object.Deleting || d.Import == nil || d.Import.Lineage != RestoreLineage(ev) ||
		d.Import.Unopened != "" || (ev.State.RestoreSerial != "" && ReplicaRestore(ev) == nil) || ev.State.BackupDue != "") {
		bad("brings a replica version back without the adopt opt-in naming its lineage, while a Job may run, paused, unread, deleting, or before a restore or a due backup")
	}
	if settledPass && !ev.Object.Deleting && ev.State.RestoreSerial == "" && ev.State.BackupDue == "" && len(found) > 0 && ReplicaImport(ev) == nil &&
		(d.Action != ActionWait || d.Wait == nil || d.Wait.Reason != infrav1.ReplicaStateFoundReason) {
		bad("a state the replica store holds for the object's name does not hold it (ReplicaStateFound)")
	}
	remediation := ev.Drift.Remediate != "" && ev.Drift.Mode == infrav1.DriftModeRemediate
	if d.Action == ActionStart && d.Operation == infrav1.OperationApply &&
		((ev.Inputs.DesiredHash == ev.Inputs.AppliedHash && !remediation && !TargetCarried(ev)) || ev.Now.Before(ev.Retry.At) || ev.Inputs.DependencyWait != nil || ev.Inputs.Problem != nil) {
		bad("starts an apply that nothing asks for")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationDrift && ((!DriftDue(ev) && !DriftCheckRequested(ev)) || ev.Object.Deleting || ev.State.Read != StatePresent) {
		bad("starts a drift check that is neither due nor asked for, or against a state not read (I7)")
	}
	// Refresh: a refresh-only apply writes the state, so it runs only when asked for (or drift
	// is to be accepted), never while the inputs want an apply (which goes first and refreshes
	// itself), never in a backoff, never against a state not read; under Manual only the
	// approved refresh-only plan, and an apply never runs a refresh-only plan.
	refreshing := d.Action == ActionStart && (d.Operation == infrav1.OperationRefresh || d.Operation == infrav1.OperationPlan && d.RefreshOnly)
	applyWanted := (ev.Inputs.DesiredHash != "" && ev.Inputs.DesiredHash != ev.Inputs.AppliedHash) || remediation
	if d.Action == ActionStart && d.Operation == infrav1.OperationDrift && (applyWanted || RefreshWanted(ev)) {
		bad("starts a drift check (due or asked for) while an apply or a refresh is wanted: those come first")
	}
	if refreshing && (!RefreshWanted(ev) || ev.Object.Deleting || applyWanted || ev.Now.Before(ev.Retry.At) || ev.State.Read != StatePresent) {
		bad("starts a refresh nothing asks for, beside an apply the inputs want, in a backoff, or against a state not read")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationRefresh && ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual &&
		(ev.Plan.Pending == nil || !ev.Plan.Pending.RefreshOnly || d.PlanID != ev.Plan.Pending.ID || ev.Plan.Approved != d.PlanID) {
		bad("under applyPolicy Manual, refreshes without the approved refresh-only plan")
	}
	if d.Action == ActionStart && d.Operation == infrav1.OperationApply && d.PlanID != "" && ev.Plan.Pending != nil && ev.Plan.Pending.RefreshOnly && d.PlanID == ev.Plan.Pending.ID {
		bad("applies a refresh-only plan as an apply")
	}
	// Targeted operations (replace, import): carried out only by an apply, on an object that
	// applied before, from a request that reads; under applyPolicy Manual only through the
	// approved plan made for that very request; never by a plan made for another request (or
	// for none); and an apply of a saved plan carries exactly the request its plan was made for.
	if d.Action == ActionStart {
		carried := TargetOf(ev, d, d.Operation)
		if carried != "" && (d.Operation != infrav1.OperationApply && d.Operation != infrav1.OperationPlan || d.RefreshOnly || d.DestroyPlan ||
			!ev.State.AppliedBefore || ev.Target.Problem != "" || ev.Object.Deleting) {
			bad("carries a targeted operation on a %s (refresh-only %v, destroy plan %v), before a first apply, unread, or while deleting", d.Operation, d.RefreshOnly, d.DestroyPlan)
		}
		if d.Operation == infrav1.OperationApply && d.PlanID != "" && ev.Plan.Pending != nil && d.PlanID == ev.Plan.Pending.ID && ev.Plan.Pending.Target != CurrentTarget(ev) {
			bad("applies a plan made for the targeted operation %q while %q is asked for", ev.Plan.Pending.Target, CurrentTarget(ev))
		}
		if d.Operation == infrav1.OperationApply && carried != "" && ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual &&
			(d.PlanID == "" || ev.Plan.Pending == nil || ev.Plan.Pending.ID != d.PlanID || ev.Plan.Approved != d.PlanID) {
			bad("under applyPolicy Manual, carries out a targeted operation without its approved plan")
		}
		if d.Operation == infrav1.OperationApply && TargetCarried(ev) && carried == "" {
			bad("an apply leaves out the targeted operation asked for")
		}
	}
	return out
}

// TestDecideInvariantsOverTheWholeEvidenceSpace walks every combination of space and checks
// the invariants on each decision, whether or not gather could produce the combination, and
// that every action is reached by evidence gather can produce.
func TestDecideInvariantsOverTheWholeEvidenceSpace(t *testing.T) {
	// Each worker keeps its own tally (no lock, no string built per combination); they are
	// merged at the end.
	type reachKey struct {
		action Action
		op     infrav1.Operation
		tag    string
	}
	type tally struct {
		reached           map[reachKey]int
		failures          []string
		total, consistent int
	}
	workers := runtime.GOMAXPROCS(0)
	tallies := make([]tally, workers)
	for i := range tallies {
		tallies[i].reached = map[reachKey]int{}
	}
	// The first violation stops every worker: a mutated rule fails in seconds, not after the
	// whole space (make mutate runs this test for each decide mutation).
	var violated atomic.Bool
	space(workers, func(w int, ev Evidence) bool {
		if violated.Load() {
			return false
		}
		d := Decide(ev)
		v := violations(ev, d)
		tl := &tallies[w]
		tl.total++
		if len(v) > 0 {
			tl.failures = append(tl.failures, fmt.Sprintf("%v: decision %+v for evidence %+v", v, d, ev))
			violated.Store(true)
			return false
		}
		if !consistent(ev) {
			return true
		}
		tl.consistent++
		tl.reached[reachKey{action: d.Action, op: d.Operation}]++
		if d.VoidAbandon != "" {
			tl.reached[reachKey{action: "VoidAbandon", tag: fmt.Sprintf("deleting=%t", ev.Object.Deleting)}]++
		}
		if d.Action == ActionStart && (d.Operation == infrav1.OperationRefresh || d.Operation == infrav1.OperationDestroy) && d.PlanID != "" {
			tl.reached[reachKey{action: "SavedPlan", op: d.Operation}]++
		}
		if d.Action == ActionStart && d.DestroyPlan {
			tl.reached[reachKey{action: "DestroyPlan", op: d.Operation}]++
		}
		if d.Action == ActionStart && d.Operation == infrav1.OperationDestroy && d.PlanID == "" && ev.Object.DestroyWithoutPlan && ev.Plan.ApplyPolicy == infrav1.ApplyPolicyManual {
			tl.reached[reachKey{action: "BreakGlass", op: d.Operation}]++
		}
		if d.Wait != nil && d.Wait.ConditionType == infrav1.DeletingCondition && waitsForApprover(d.Wait.Reason) {
			tl.reached[reachKey{action: "DestroyWaits", tag: d.Wait.Reason}]++
		}
		if d.Action == ActionStart && d.Operation == infrav1.OperationDrift && !DriftDue(ev) {
			tl.reached[reachKey{action: "AskedFor", op: infrav1.OperationDrift}]++
		}
		if d.Action == ActionStart && TargetOf(ev, d, d.Operation) != "" {
			tag := string(d.Operation)
			if d.PlanID != "" {
				tag += "/saved"
			}
			tl.reached[reachKey{action: "Targeted", tag: tag}]++
		}
		if d.Wait != nil && d.Wait.Reason == infrav1.TargetOperationInvalidReason {
			tl.reached[reachKey{action: "Targeted", tag: "invalid"}]++
		}
		if d.Wait != nil && (d.Wait.Reason == infrav1.RetainedStateFoundReason || d.Wait.Reason == infrav1.StateLineageChangedReason || d.Wait.Reason == infrav1.ReplicaStateFoundReason) {
			tl.reached[reachKey{action: "Hold", tag: d.Wait.Reason}]++
		}
		return true
	})
	reached := map[string]int{}
	var failures []string
	total, consistentTotal := 0, 0
	for _, tl := range tallies {
		total += tl.total
		consistentTotal += tl.consistent
		failures = append(failures, tl.failures...)
		for k, n := range tl.reached {
			key := string(k.action) + "/" + string(k.op)
			if k.tag != "" {
				key = string(k.action) + "/" + k.tag
			}
			reached[key] += n
		}
	}
	failures = failures[:min(len(failures), 5)]
	for _, f := range failures {
		t.Error(f)
	}
	if len(failures) > 0 {
		return // the space was not walked to its end: what it reached says nothing
	}
	for _, a := range []string{"None/", "AddFinalizer/", "WaitJob/", "Bookkeep/Apply", "SkipRun/", "WaitLag/", "Start/Apply",
		"Start/Destroy", "Start/Restore", "Start/Drift", "Start/Refresh", "SavedPlan/Refresh",
		"SavedPlan/Destroy", "DestroyPlan/Plan", "BreakGlass/Destroy", "DestroyWaits/" + infrav1.PlanAwaitingApprovalReason, "AskedFor/Drift", "Idle/", "RecoverStatus/", "Backup/", "Wait/", "RemoveFinalizer/", "Cleanup/", "Retain/", "Abandon/",
		"VoidAbandon/deleting=false", "VoidAbandon/deleting=true", "LeaveState/", "DeleteJob/",
		"Targeted/Apply", "Targeted/Apply/saved", "Targeted/Plan", "Targeted/invalid",
		"Hold/" + infrav1.RetainedStateFoundReason, "Hold/" + infrav1.StateLineageChangedReason, "Hold/" + infrav1.ReplicaStateFoundReason, "ImportReplica/"} {
		if reached[a] == 0 {
			t.Errorf("no evidence gather can produce reaches %s", a)
		}
	}
	for key := range reached {
		if op, ok := strings.CutPrefix(key, "Start/"); ok && !slices.Contains(StartedOperations, infrav1.Operation(op)) {
			t.Errorf("Decide starts %s, which StartedOperations (and the docs) do not list", op)
		}
	}
	t.Logf("%d combinations, %d of them producible by gather; actions reached: %v", total, consistentTotal, reached)
}

func TestNeedsLagCheck(t *testing.T) {
	cases := []struct {
		ev   Evidence
		want bool
	}{
		{Evidence{Object: ObjectEvidence{HasFinalizer: true}}, false},
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true}}, false}, // a normal pass keeps block-move: nothing to confirm
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true, Paused: true}}, true},
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, ActiveJob: "j"}}, true},
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, Deleting: true}}, true},
		{Evidence{Object: ObjectEvidence{Deleting: true}}, false}, // no finalizer: nothing left to clear
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, Deleting: true}, Jobs: JobsEvidence{Running: []JobView{{Name: "j"}}}}, false},
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, Deleting: true}, Jobs: JobsEvidence{Current: &JobView{Name: "j", Phase: JobFinished}}}, false}, // bookkeeping comes first
		// The source copy of a move counts no Job: once the pods are terminal it lets go, after the live checks.
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, Deleting: true, Paused: true, MoveDeletion: true},
			Jobs: JobsEvidence{Current: &JobView{Name: "j", Phase: JobFinished}, CurrentPods: PodsTerminal}}, true},
		{Evidence{Object: ObjectEvidence{HasFinalizer: true, Deleting: true, Paused: true, MoveDeletion: true},
			Jobs: JobsEvidence{Current: &JobView{Name: "j", Phase: JobFinished}, CurrentPods: PodsRunning}}, false},
	}
	for i, tc := range cases {
		if got := NeedsLagCheck(tc.ev); got != tc.want {
			t.Errorf("case %d: NeedsLagCheck(%+v) = %v, want %v", i, tc.ev, got, tc.want)
		}
	}
}

func TestBackoffDoublesFromOneMinuteToTen(t *testing.T) {
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff after %d failures = %s, want %s", i+1, got, w)
		}
	}
}

// A Job's state channel is told the lineage the pass read, unless the pass read no state or
// the Job is a restore, which replaces the state.
func TestExpectedLineage(t *testing.T) {
	const l = "5e0c7a6d-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
	for _, c := range []struct {
		state StateView
		op    infrav1.Operation
		want  string
	}{
		{StatePresent, infrav1.OperationApply, l},
		{StatePresent, infrav1.OperationDestroy, l},
		{StatePresent, infrav1.OperationPlan, l},
		{StatePresent, infrav1.OperationRefresh, l},
		{StatePresent, infrav1.OperationDrift, l},
		{StatePresent, infrav1.OperationRestore, ""},
		{StateAbsent, infrav1.OperationApply, ""},
		{StateNotRead, infrav1.OperationApply, ""},
		{StateUnreadable, infrav1.OperationDestroy, ""},
	} {
		ev := Evidence{State: StateEvidence{Read: c.state, Lineage: l}}
		if c.state != StatePresent {
			ev.State.Lineage = ""
		}
		if got := ExpectedLineage(ev, c.op); got != c.want {
			t.Errorf("state %v, %s: lineage %q, want %q", c.state, c.op, got, c.want)
		}
	}
}

// The first mutating Job started against no state marks the object, for the incarnation the mark
// names only; counting a later Job records the lineage and drops the mark.
func TestFirstRunMarkAndClaim(t *testing.T) {
	obj := func(ann map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: ann}}
	}
	absent := Evidence{State: StateEvidence{Read: StateAbsent}}
	for _, c := range []struct {
		name string
		ev   Evidence
		op   infrav1.Operation
		ann  map[string]string
		want string
	}{
		{"first apply against no state", absent, infrav1.OperationApply, nil, "u1/job-1"},
		{"a plan mutates nothing", absent, infrav1.OperationPlan, nil, ""},
		{"a state exists", Evidence{State: StateEvidence{Read: StatePresent, Lineage: "R"}}, infrav1.OperationApply, nil, ""},
		{"the state was not read", Evidence{}, infrav1.OperationApply, nil, ""},
		{"a lineage is recorded", Evidence{State: StateEvidence{Read: StateAbsent, OwnLineage: "L"}}, infrav1.OperationApply, nil, ""},
		{"an earlier mark of this incarnation is kept", absent, infrav1.OperationApply, map[string]string{infrav1.StateFirstRunAnnotation: "u1/job-0"}, "u1/job-0"},
		{"a mark of another incarnation is replaced", absent, infrav1.OperationApply, map[string]string{infrav1.StateFirstRunAnnotation: "u0/job-0"}, "u1/job-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := obj(c.ann)
			NoteFirstRun(o, c.ev, c.op, "job-1")
			if got := o.GetAnnotations()[infrav1.StateFirstRunAnnotation]; got != c.want {
				t.Fatalf("mark %q, want %q", got, c.want)
			}
		})
	}
	if !IsFirstRunMark("u1/job-1", "u1") || IsFirstRunMark("u0/job-1", "u1") || IsFirstRunMark("/job-1", "") {
		t.Fatal("a mark counts for the incarnation it names only")
	}
	o := obj(map[string]string{infrav1.StateFirstRunAnnotation: "u1/job-1"})
	RecordLineage(o, "", "R")
	if a := o.GetAnnotations(); a[infrav1.StateLineageAnnotation] != "R" || a[infrav1.StateFirstRunAnnotation] != "" {
		t.Fatalf("counting the next Job records the lineage it left and drops the mark: %v", a)
	}
}
