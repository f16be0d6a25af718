package decide

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestDriftCheckRequestStartsACheckNow: a check asked for (captf.io/drift-check) starts a
// Drift Job on an object that is otherwise idle, whatever the schedule says (not due, or off)
// and whatever the mode; everything Decide puts before a due check still comes first.
func TestDriftCheckRequestStartsACheckNow(t *testing.T) {
	idle := func(drift DriftEvidence) Evidence {
		return Evidence{
			Object: ObjectEvidence{Provisioned: true, BlockMove: true},
			Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
			State:  StateEvidence{AppliedBefore: true, SecretCached: true, Read: StatePresent},
			Drift:  drift,
		}
	}
	notDue := now.Add(time.Hour)
	cases := []struct {
		name string
		ev   Evidence
		want Decision
	}{
		{"not due for an hour: the check starts now",
			idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"without the request the same object is idle until the check is due",
			idle(DriftEvidence{DueAt: notDue}),
			Decision{Action: ActionIdle}},
		{"checks off (interval 0): the request still runs one",
			idle(DriftEvidence{CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"mode Report", idle(DriftEvidence{DueAt: notDue, Mode: infrav1.DriftModeReport, CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"mode Remediate", idle(DriftEvidence{DueAt: notDue, Mode: infrav1.DriftModeRemediate, CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"mode Accept", idle(DriftEvidence{DueAt: notDue, Mode: infrav1.DriftModeAccept, CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDrift}},
		{"an apply the inputs want goes first",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.Inputs.DesiredHash = "h2"
				return ev
			}(),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a remediation pending goes first",
			idle(DriftEvidence{DueAt: notDue, Mode: infrav1.DriftModeRemediate, Remediate: "j4", CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"drift to accept goes first",
			idle(DriftEvidence{DueAt: notDue, Mode: infrav1.DriftModeAccept, Remediate: "j4", CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRefresh}},
		{"a refresh asked for goes first",
			idle(DriftEvidence{DueAt: notDue, RefreshRequest: "r1", CheckRequest: "c1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationRefresh}},
		{"a plan waiting for approval holds the check like the apply it waits for",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.Inputs.DesiredHash = "h2"
				ev.Plan = PlanEvidence{ApplyPolicy: infrav1.ApplyPolicyManual, Pending: &infrav1.PlanRecord{ID: "p1", InputsHash: "h2", Update: 1}}
				return ev
			}(),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.PlanAwaitingApprovalReason}}},
		{"a restore asked for goes first",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.State.RestoreSerial, ev.State.Backups = "3", []BackupView{{Name: "b3", Serial: 3}}
				return ev
			}(),
			Decision{Action: ActionStart, Operation: infrav1.OperationRestore}},
		{"never against a state not read (I7)",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.State.Read = StateNotRead
				return ev
			}(),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.CacheLagReason}}},
		{"never against a lost state (I7)",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.State.Read = StateAbsent
				return ev
			}(),
			Decision{Action: ActionWait, Wait: &Wait{Reason: infrav1.StateLostReason}}},
		{"an object that never applied applies first; the request waits",
			Evidence{Inputs: InputsEvidence{DesiredHash: "h1"}, State: StateEvidence{Read: StateAbsent}, Drift: DriftEvidence{CheckRequest: "c1"}},
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, SetBlockMove: true}},
		{"paused: nothing starts",
			func() Evidence {
				ev := idle(DriftEvidence{DueAt: notDue, CheckRequest: "c1"})
				ev.Object.Paused = true
				return ev
			}(),
			Decision{Action: ActionWait, ClearBlockMove: true, Wait: &Wait{Reason: infrav1.PausedReason}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := settled(tc.ev)
			ev.Now = now
			got := Decide(ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation || got.SetBlockMove != tc.want.SetBlockMove ||
				got.ClearBlockMove != tc.want.ClearBlockMove || (tc.want.Wait != nil && (got.Wait == nil || got.Wait.Reason != tc.want.Wait.Reason)) {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("a running Job: the request waits for it", func(t *testing.T) {
		ev := idle(DriftEvidence{CheckRequest: "c1"})
		ev.Object.HasFinalizer = true
		ev.Jobs.Running = []JobView{{Name: "captf-x-3", Seq: 3, Operation: infrav1.OperationApply, Phase: JobRunning}}
		ev.Now = now
		if got := Decide(ev); got.Action != ActionWaitJob {
			t.Fatalf("Decide = %+v, want WaitJob", got)
		}
	})
}

// TestDriftCheckRequestReadsTheStateLive: a request is a reason to read the state live (the
// check needs it, I7) on an object that applied, and no reason on one that never did.
func TestDriftCheckRequestReadsTheStateLive(t *testing.T) {
	ev := Evidence{Now: now, Inputs: InputsEvidence{Gathered: true, DesiredHash: "h1", AppliedHash: "h1"},
		State: StateEvidence{AppliedBefore: true, SecretCached: true}, Drift: DriftEvidence{DueAt: now.Add(time.Hour)}}
	if NeedsLiveState(ev) {
		t.Fatal("an idle object between two checks reads its state live")
	}
	ev.Drift.CheckRequest = "c1"
	if !NeedsLiveState(ev) {
		t.Fatal("a check asked for does not read the state it needs")
	}
	ev.State.AppliedBefore = false
	if DriftCheckRequested(ev) {
		t.Fatal("a check is asked for on an object with no state to check")
	}
}

// TestDriftCheckRequestAnsweredByItsJob: bookkeeping removes the request a Drift Job recorded
// once that Job ended, whatever its outcome, and keeps a request whose value changed while it
// ran, or one no Job answered.
func TestDriftCheckRequestAnsweredByItsJob(t *testing.T) {
	for name, tc := range map[string]struct {
		op       infrav1.Operation
		outcome  infrav1.RunOutcome
		answered string // the value the Job recorded
		now      string // the value on the object when the Job is counted
		want     string // "" : the annotation is gone
	}{
		"a check that found what it found answers it":       {infrav1.OperationDrift, infrav1.RunSucceeded, "c1", "c1", ""},
		"a failed check answers it too (it is not retried)": {infrav1.OperationDrift, infrav1.RunFailed, "c1", "c1", ""},
		"an interrupted check answers it":                   {infrav1.OperationDrift, infrav1.RunInterrupted, "c1", "c1", ""},
		"a fenced check answers it":                         {infrav1.OperationDrift, infrav1.RunFenced, "c1", "c1", ""},
		"a newer request made while it ran stays":           {infrav1.OperationDrift, infrav1.RunSucceeded, "c1", "c2", "c2"},
		"a scheduled check that answered nothing keeps it":  {infrav1.OperationDrift, infrav1.RunSucceeded, "", "c1", "c1"},
		"an apply answers no check":                         {infrav1.OperationApply, infrav1.RunSucceeded, "c1", "c1", "c1"},
		"a refresh answers no check":                        {infrav1.OperationRefresh, infrav1.RunSucceeded, "c1", "c1", "c1"},
	} {
		t.Run(name, func(t *testing.T) {
			o := &metav1.ObjectMeta{}
			SetAnnotation(o, infrav1.DriftCheckAnnotation, tc.now)
			cur := JobView{Name: "j-5", Seq: 5, Operation: tc.op}
			b := JudgeFinished(cur, RunEnd{Outcome: tc.outcome, Message: "m"}, 0, now)
			b.DriftCheckRequest = tc.answered
			b.Markers(o, cur, "")
			got, ok := o.Annotations[infrav1.DriftCheckAnnotation]
			switch {
			case tc.want == "" && ok:
				t.Fatalf("request %q kept, want it answered", got)
			case tc.want != "" && got != tc.want:
				t.Fatalf("request = %q (present %t), want %q kept", got, ok, tc.want)
			}
			if tc.op == infrav1.OperationDrift && tc.outcome == infrav1.RunFailed && b.Counts {
				t.Fatal("a failed drift check counts toward the backoff")
			}
		})
	}
}
