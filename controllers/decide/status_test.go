package decide

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// want is one expected condition; Status "" means the condition must be absent.
type want struct {
	Type   string
	Status metav1.ConditionStatus
	Reason string
}

func checkConditions(t *testing.T, st *infrav1.TerraformStatus, wants []want) {
	t.Helper()
	for _, w := range wants {
		c := meta.FindStatusCondition(st.Conditions, w.Type)
		switch {
		case w.Status == "" && c != nil:
			t.Errorf("%s = %s/%s, want absent", w.Type, c.Status, c.Reason)
		case w.Status == "":
		case c == nil:
			t.Errorf("%s absent, want %s/%s", w.Type, w.Status, w.Reason)
		case c.Status != w.Status || c.Reason != w.Reason:
			t.Errorf("%s = %s/%s (%q), want %s/%s", w.Type, c.Status, c.Reason, c.Message, w.Status, w.Reason)
		}
	}
}

func TestSetPaused(t *testing.T) {
	for _, tc := range []struct {
		paused bool
		want   want
	}{
		{true, want{infrav1.PausedCondition, metav1.ConditionTrue, infrav1.PausedReason}},
		{false, want{infrav1.PausedCondition, metav1.ConditionFalse, infrav1.NotPausedReason}},
	} {
		st := &infrav1.TerraformStatus{}
		setPaused(conditions{st: st}, Evidence{Object: ObjectEvidence{Paused: tc.paused}})
		checkConditions(t, st, []want{tc.want})
	}
}

func TestSetDependenciesReady(t *testing.T) {
	wait := &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason}
	for name, tc := range map[string]struct {
		ev   Evidence
		want want
	}{
		"inputs not read: says nothing":    {Evidence{}, want{Type: infrav1.DependenciesReadyCondition}},
		"ready":                            {Evidence{Inputs: InputsEvidence{Gathered: true}}, want{infrav1.DependenciesReadyCondition, metav1.ConditionTrue, infrav1.DependenciesReadyReason}},
		"waiting":                          {Evidence{Inputs: InputsEvidence{Gathered: true, DependencyWait: wait}}, want{infrav1.DependenciesReadyCondition, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason}},
		"deleting: says nothing":           {Evidence{Object: ObjectEvidence{Deleting: true}, Inputs: InputsEvidence{Gathered: true}}, want{Type: infrav1.DependenciesReadyCondition}},
		"paused: says nothing":             {Evidence{Object: ObjectEvidence{Paused: true}, Inputs: InputsEvidence{Gathered: true}}, want{Type: infrav1.DependenciesReadyCondition}},
		"deleting with a wait: no verdict": {Evidence{Object: ObjectEvidence{Deleting: true}, Inputs: InputsEvidence{Gathered: true, DependencyWait: wait}}, want{Type: infrav1.DependenciesReadyCondition}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			setDependenciesReady(conditions{st: st}, tc.ev)
			checkConditions(t, st, []want{tc.want})
		})
	}
}

func TestSetInputsValid(t *testing.T) {
	problem := &Problem{ConditionType: infrav1.InputsValidCondition, Reason: infrav1.InputsTooLargeReason, Message: "too large"}
	for name, tc := range map[string]struct {
		ev   Evidence
		rep  Report
		want want
	}{
		"assembled":                   {Evidence{Inputs: InputsEvidence{Gathered: true}}, Report{}, want{infrav1.InputsValidCondition, metav1.ConditionTrue, infrav1.InputsAssembledReason}},
		"a problem":                   {Evidence{Inputs: InputsEvidence{Gathered: true, Problem: problem}}, Report{}, want{infrav1.InputsValidCondition, metav1.ConditionFalse, infrav1.InputsTooLargeReason}},
		"a problem found at start":    {Evidence{Inputs: InputsEvidence{Gathered: true}}, Report{StartProblem: problem}, want{infrav1.InputsValidCondition, metav1.ConditionFalse, infrav1.InputsTooLargeReason}},
		"not read: says nothing":      {Evidence{}, Report{}, want{Type: infrav1.InputsValidCondition}},
		"dependency wait: no verdict": {Evidence{Inputs: InputsEvidence{Gathered: true, DependencyWait: &Wait{}}}, Report{}, want{Type: infrav1.InputsValidCondition}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			setInputsValid(conditions{st: st}, tc.ev, tc.rep)
			checkConditions(t, st, []want{tc.want})
		})
	}
}

func TestSetOperation(t *testing.T) {
	running := []JobView{{Name: "j1", Operation: infrav1.OperationDrift, Phase: JobRunning}}
	for name, tc := range map[string]struct {
		ev   Evidence
		d    Decision
		rep  Report
		want want
	}{
		"a counted success": {Evidence{}, Decision{Action: ActionBookkeep},
			Report{Bookkept: &Bookkept{Job: "j1", Op: infrav1.OperationApply, Outcome: infrav1.RunSucceeded}},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionTrue, infrav1.JobSucceededReason}},
		"a counted failure": {Evidence{}, Decision{Action: ActionBookkeep},
			Report{Bookkept: &Bookkept{Job: "j1", Op: infrav1.OperationApply, Outcome: infrav1.RunFailed, Counts: true, Backoff: time.Minute}},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.JobFailedReason}},
		"a counted restore failure reports on its own condition": {Evidence{}, Decision{Action: ActionBookkeep},
			Report{Bookkept: &Bookkept{Job: "j1", Op: infrav1.OperationRestore, Outcome: infrav1.RunFailed, Counts: true}},
			want{infrav1.RestoreJobSucceededCondition, metav1.ConditionFalse, infrav1.JobFailedReason}},
		"a Job started": {Evidence{}, Decision{Action: ActionStart, Operation: infrav1.OperationApply}, Report{Started: "j2"},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason}},
		"a Job refused": {Evidence{}, Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}, Report{Rejected: "forbidden"},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.JobFailedReason}},
		"a lease wait": {Evidence{}, Decision{Action: ActionStart, Operation: infrav1.OperationApply},
			Report{LeaseWait: &LeaseWait{Condition: infrav1.ApplyJobSucceededCondition, Reason: infrav1.WaitingForClusterOperationReason}},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.WaitingForClusterOperationReason}},
		"a running drift Job": {Evidence{Jobs: JobsEvidence{Running: running}}, Decision{Action: ActionWaitJob}, Report{},
			want{infrav1.DriftJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason}},
		"a finished Job whose pod runs": {Evidence{Jobs: JobsEvidence{Current: &JobView{Name: "j1", Operation: infrav1.OperationApply, Phase: JobFinished}}},
			Decision{Action: ActionWaitJob, Wait: &Wait{Message: "pod"}}, Report{},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason}},
		"a backoff": {Evidence{}, Decision{Action: ActionWait, Wait: &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.JobFailedReason}},
			Report{}, want{infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.JobFailedReason}},
		"a plan awaiting approval: False, kubectl wait --for=condition=ApplyJobSucceeded=False returns": {Evidence{},
			Decision{Action: ActionWait, Wait: &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.PlanAwaitingApprovalReason}},
			Report{}, want{infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.PlanAwaitingApprovalReason}},
		"status recovered": {Evidence{}, Decision{Action: ActionRecoverStatus}, Report{Recovered: true},
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionTrue, infrav1.JobSucceededReason}},
		"idle: says nothing": {Evidence{}, Decision{Action: ActionIdle}, Report{}, want{Type: infrav1.ApplyJobSucceededCondition}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			setOperation(conditions{st: st}, tc.ev, tc.d, tc.rep)
			checkConditions(t, st, []want{tc.want})
		})
	}
}

// A lock held by someone else is reported by the Job that met it and stays reported until the
// next Job is counted: the state itself reads fine in between.
func TestSetStateReadableKeepsALockReportUntilTheNextJob(t *testing.T) {
	locked := want{infrav1.StateReadableCondition, metav1.ConditionFalse, infrav1.StateLockedReason}
	readable := want{infrav1.StateReadableCondition, metav1.ConditionTrue, infrav1.StateReadableReason}
	st := &infrav1.TerraformStatus{}
	c := conditions{st: st}
	ev := Evidence{State: StateEvidence{Read: StatePresent}}
	failed := &Bookkept{Outcome: infrav1.RunFailed, Op: infrav1.OperationApply}
	setStateReadable(c, ev, Decision{}, Report{Bookkept: failed, LockHolder: &runnerapi.LockHolder{ID: "l1", Who: "ops@laptop"}})
	checkConditions(t, st, []want{locked})
	setStateReadable(c, ev, Decision{}, Report{})
	checkConditions(t, st, []want{locked})
	setStateReadable(c, ev, Decision{}, Report{Bookkept: failed})
	checkConditions(t, st, []want{readable})
	setStateReadable(c, ev, Decision{}, Report{})
	checkConditions(t, st, []want{readable})
}

func TestSetOutputsValid(t *testing.T) {
	for name, tc := range map[string]struct {
		rep         Report
		want        want
		provisioned bool
	}{
		"not read: says nothing": {Report{}, want{Type: infrav1.OutputsValidCondition}, false},
		"valid: provisioned":     {Report{Outputs: &OutputsResult{}}, want{infrav1.OutputsValidCondition, metav1.ConditionTrue, infrav1.OutputsValidReason}, true},
		"a module problem": {Report{Outputs: &OutputsResult{Err: errors.New("no provider_id"), Reason: infrav1.OutputMissingReason}},
			want{infrav1.OutputsValidCondition, metav1.ConditionFalse, infrav1.OutputMissingReason}, false},
		"another error": {Report{Outputs: &OutputsResult{Err: errors.New("boom")}},
			want{infrav1.OutputsValidCondition, metav1.ConditionFalse, infrav1.OutputInvalidReason}, false},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			setOutputsValid(conditions{st: st}, tc.rep)
			checkConditions(t, st, []want{tc.want})
			if st.IsProvisioned() != tc.provisioned {
				t.Errorf("provisioned = %v, want %v", st.IsProvisioned(), tc.provisioned)
			}
		})
	}
}

func TestSetDeleting(t *testing.T) {
	children := &Wait{ConditionType: infrav1.DeletionBlockedCondition, Reason: infrav1.WaitingForMachinesReason, Message: "m1"}
	for name, tc := range map[string]struct {
		ev    Evidence
		d     Decision
		rep   Report
		wants []want
	}{
		"not deleting": {Evidence{}, Decision{Action: ActionIdle}, Report{},
			[]want{{infrav1.DeletingCondition, metav1.ConditionFalse, infrav1.NotDeletingReason}, {Type: infrav1.DeletionBlockedCondition}}},
		"waiting for children": {Evidence{Object: ObjectEvidence{Deleting: true}}, Decision{Action: ActionWait, Wait: children}, Report{},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.WaitingForMachinesReason}, {infrav1.DeletionBlockedCondition, metav1.ConditionTrue, infrav1.WaitingForMachinesReason}}},
		"destroy started": {Evidence{Object: ObjectEvidence{Deleting: true}}, Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}, Report{Started: "j1"},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.DestroyingReason}, {Type: infrav1.DeletionBlockedCondition}}},
		"paused deletion": {Evidence{Object: ObjectEvidence{Deleting: true, Paused: true}}, Decision{Action: ActionWait, Wait: &Wait{ConditionType: infrav1.DeletingCondition, Reason: infrav1.PausedReason}}, Report{},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.PausedReason}}},
		"part of a move": {Evidence{Object: ObjectEvidence{Deleting: true, MoveDeletion: true}}, Decision{Action: ActionRemoveFinalizer}, Report{},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.MoveReason}}},
		"cleanup blocked": {Evidence{Object: ObjectEvidence{Deleting: true}}, Decision{Action: ActionCleanup}, Report{CleanupBlocked: "state not empty"},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.DestroyingReason}}},
		"a lease wait": {Evidence{Object: ObjectEvidence{Deleting: true}}, Decision{Action: ActionStart, Operation: infrav1.OperationDestroy},
			Report{LeaseWait: &LeaseWait{Reason: infrav1.WaitingForClusterOperationReason}},
			[]want{{infrav1.DeletingCondition, metav1.ConditionTrue, infrav1.WaitingForClusterOperationReason}}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{Conditions: []metav1.Condition{{Type: infrav1.DeletionBlockedCondition, Status: metav1.ConditionTrue, Reason: "old"}}}
			setDeleting(conditions{st: st}, tc.ev, tc.d, tc.rep)
			checkConditions(t, st, tc.wants)
		})
	}
}

func TestSetReady(t *testing.T) {
	yes := true
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason}
	}
	for name, tc := range map[string]struct {
		ev   Evidence
		st   infrav1.TerraformStatus
		want want
	}{
		"provisioned and nothing false": {Evidence{}, infrav1.TerraformStatus{Initialization: &infrav1.Initialization{Provisioned: &yes},
			Conditions: []metav1.Condition{cond(infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason)}},
			want{infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason}},
		"a false input wins": {Evidence{}, infrav1.TerraformStatus{Initialization: &infrav1.Initialization{Provisioned: &yes},
			Conditions: []metav1.Condition{cond(infrav1.InputsValidCondition, metav1.ConditionFalse, infrav1.InputsTooLargeReason)}},
			want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.InputsTooLargeReason}},
		"not provisioned: the running Job says why": {Evidence{}, infrav1.TerraformStatus{
			Conditions: []metav1.Condition{cond(infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason)}},
			want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.JobRunningReason}},
		"provisioned, a change's plan awaits approval: still Ready, the infrastructure is the one applied last": {Evidence{},
			infrav1.TerraformStatus{Initialization: &infrav1.Initialization{Provisioned: &yes},
				Conditions: []metav1.Condition{cond(infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.PlanAwaitingApprovalReason)}},
			want{infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason}},
		"not provisioned, the first plan awaits approval: not Ready, and it says why": {Evidence{},
			infrav1.TerraformStatus{Conditions: []metav1.Condition{cond(infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.PlanAwaitingApprovalReason)}},
			want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.PlanAwaitingApprovalReason}},
		"not provisioned, nothing known": {Evidence{}, infrav1.TerraformStatus{},
			want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.NotProvisionedReason}},
		"deleting: Deleting says why": {Evidence{Object: ObjectEvidence{Deleting: true}}, infrav1.TerraformStatus{Initialization: &infrav1.Initialization{Provisioned: &yes},
			Conditions: []metav1.Condition{{Type: infrav1.DeletingCondition, Status: metav1.ConditionTrue, Reason: infrav1.WaitingForMachinesReason, Message: "m1"}}},
			want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.WaitingForMachinesReason}},
	} {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			setReady(conditions{st: &st}, tc.ev, Report{})
			checkConditions(t, &st, []want{tc.want})
		})
	}
}

func TestSetStateReplicaReportsWhatTheStoreWasLastSeenToHold(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	serials := func(st *infrav1.TerraformStatus) []string {
		var out []string
		for _, v := range st.StateReplica {
			out = append(out, v.Lineage+"/"+strconv.FormatInt(v.Serial, 10))
		}
		return out
	}
	before := []infrav1.StateReplicaVersion{{Lineage: "a", Serial: 2, Time: at(2 * time.Minute)}, {Lineage: "a", Serial: 1, Time: at(time.Minute)}}
	for _, tc := range []struct {
		name string
		rep  Report
		want []string
	}{
		{name: "nothing listed or written: the status stands", want: []string{"a/2", "a/1"}},
		{name: "a failed write adds nothing", rep: Report{Replica: &ReplicaResult{Lineage: "a", Serial: 3, Reason: infrav1.ReplicaUnavailableReason}},
			want: []string{"a/2", "a/1"}},
		{name: "a write the store took is added first, whatever its clock says", rep: Report{Replica: &ReplicaResult{Lineage: "a", Serial: 3, Written: true, Time: t0}},
			want: []string{"a/3", "a/2", "a/1"}},
		{name: "a replay of a listed version is not listed twice", rep: Report{Replica: &ReplicaResult{Lineage: "a", Serial: 2}},
			want: []string{"a/2", "a/1"}},
		{name: "a listing replaces the status: lineages by their newest time, each by serial", rep: Report{ReplicaListed: []ReplicaVersionView{
			{Lineage: "old", Serial: 7, Written: t0}, {Lineage: "a", Serial: 1, Written: t0.Add(time.Minute)},
			{Lineage: "a", Serial: 4, Written: t0.Add(time.Hour)}, {Lineage: "old", Serial: 8, Written: t0.Add(time.Second)},
		}}, want: []string{"a/4", "a/1", "old/8", "old/7"}},
		{name: "an empty listing empties it", rep: Report{ReplicaListed: []ReplicaVersionView{}}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{StateReplica: append([]infrav1.StateReplicaVersion(nil), before...)}
			setStateReplica(conditions{st: st}, tc.rep)
			if got := serials(st); !slices.Equal(got, tc.want) {
				t.Errorf("status.stateReplica = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("at most 32, the newest", func(t *testing.T) {
		var listed []ReplicaVersionView
		for i := int64(1); i <= 40; i++ {
			listed = append(listed, ReplicaVersionView{Lineage: "a", Serial: i, Written: t0.Add(time.Duration(i) * time.Second)})
		}
		st := &infrav1.TerraformStatus{}
		setStateReplica(conditions{st: st}, Report{ReplicaListed: listed})
		if n, first, last := len(st.StateReplica), st.StateReplica[0].Serial, st.StateReplica[len(st.StateReplica)-1].Serial; n != 32 || first != 40 || last != 9 {
			t.Errorf("kept %d versions, serials %d..%d; want 32, 40..9", n, first, last)
		}
	})
}
