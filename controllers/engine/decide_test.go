package engine

import (
	"testing"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestDecideTable(t *testing.T) {
	running := []JobView{{Name: "captf-x-3", Seq: 3, Operation: infrav1.OperationApply, Phase: JobRunning}}
	cases := []struct {
		name string
		ev   Evidence
		want Decision
	}{
		{"a running Job keeps the marks and waits",
			Evidence{Running: running, BlockMove: true, ActiveJob: "captf-x-3"},
			Decision{Action: ActionWaitJob}},
		{"a running Job restores a missing block-move",
			Evidence{Running: running},
			Decision{Action: ActionWaitJob, SetBlockMove: true}},
		{"lag changes nothing",
			Evidence{Lag: true, BlockMove: true, ActiveJob: "captf-x-3", Paused: true},
			Decision{Action: ActionWaitLag}},
		{"paused and idle clears block-move and activeJob",
			Evidence{Paused: true, BlockMove: true, ActiveJob: "captf-x-3", DesiredHash: "h2", AppliedHash: "h1"},
			Decision{Action: ActionWait, ClearBlockMove: true, ClearActiveJob: true}},
		{"changed inputs start an apply and set block-move",
			Evidence{DesiredHash: "h2", AppliedHash: "h1"},
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, SetBlockMove: true}},
		{"unchanged inputs stay idle, keeping block-move",
			Evidence{DesiredHash: "h1", AppliedHash: "h1", BlockMove: true},
			Decision{Action: ActionIdle}},
		{"a failed apply backs off",
			Evidence{DesiredHash: "h2", AppliedHash: "h1", BlockMove: true, RetryAt: now.Add(time.Minute)},
			Decision{Action: ActionWait}},
		{"backoff over: apply again",
			Evidence{DesiredHash: "h2", AppliedHash: "h1", BlockMove: true, RetryAt: now.Add(-time.Second)},
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a dependency wait starts nothing",
			Evidence{DesiredHash: "h2", BlockMove: true, DependencyWait: &Wait{Reason: infrav1.WaitingForClusterInfrastructureReason}},
			Decision{Action: ActionWait}},
		{"bad inputs start nothing",
			Evidence{BlockMove: true, InputsProblem: &Problem{Reason: infrav1.InputsTooLargeReason}},
			Decision{Action: ActionWait}},
		{"deleting with state destroys",
			Evidence{Deleting: true, StateExists: true, BlockMove: true},
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"deleting cluster waits for its machines",
			Evidence{Deleting: true, StateExists: true, BlockMove: true, Children: []string{"TerraformMachine/m1"}},
			Decision{Action: ActionWait}},
		{"destroyed: clean up and let go",
			Evidence{Deleting: true, StateExists: true, Destroyed: true, BlockMove: true},
			Decision{Action: ActionCleanupAndRemoveFinalizer, ClearBlockMove: true}},
		{"never applied: let go without a destroy",
			Evidence{Deleting: true, BlockMove: true},
			Decision{Action: ActionCleanupAndRemoveFinalizer, ClearBlockMove: true}},
		{"a move deletion never destroys",
			Evidence{Deleting: true, MoveDeletion: true, StateExists: true, BlockMove: true},
			Decision{Action: ActionRemoveFinalizer, ClearBlockMove: true}},
		{"a paused deletion never destroys",
			Evidence{Deleting: true, Paused: true, StateExists: true, BlockMove: true},
			Decision{Action: ActionWait, ClearBlockMove: true}},
		{"a failed destroy backs off",
			Evidence{Deleting: true, StateExists: true, BlockMove: true, RetryAt: now.Add(time.Minute)},
			Decision{Action: ActionWait}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Now = now
			got := Decide(tc.ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation ||
				got.SetBlockMove != tc.want.SetBlockMove || got.ClearBlockMove != tc.want.ClearBlockMove {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if tc.want.ClearActiveJob && !got.ClearActiveJob {
				t.Fatalf("Decide did not clear activeJob: %+v", got)
			}
		})
	}
}

// TestDecideInvariantsExhaustively walks every combination of the boolean evidence and checks
// the invariants no decision may break, whatever the combination.
func TestDecideInvariantsExhaustively(t *testing.T) {
	const bits = 13
	for mask := 0; mask < 1<<bits; mask++ {
		b := func(i int) bool { return mask&(1<<i) != 0 }
		ev := Evidence{
			Now: now, Deleting: b(0), HasFinalizer: true, Paused: b(1), MoveDeletion: b(2),
			BlockMove: b(3), Lag: b(5), StateExists: b(6), Destroyed: b(7),
		}
		if b(4) {
			ev.Running = []JobView{{Name: "j", Phase: JobRunning}}
		}
		if b(8) {
			ev.ActiveJob = "j"
		}
		if b(9) {
			ev.DesiredHash, ev.AppliedHash = "new", "old"
		} else {
			ev.DesiredHash, ev.AppliedHash = "same", "same"
		}
		if b(10) {
			ev.Children = []string{"m"}
		}
		if b(11) {
			ev.RetryAt = now.Add(time.Minute)
		}
		if b(12) {
			ev.DependencyWait = &Wait{Reason: "x"}
		}
		d := Decide(ev)
		busy := len(ev.Running) > 0 || ev.Lag
		clears := d.ClearBlockMove || d.ClearActiveJob || d.Action == ActionRemoveFinalizer || d.Action == ActionCleanupAndRemoveFinalizer
		switch {
		case busy && (clears || d.Action == ActionStart):
			t.Fatalf("I1-I4: a running or possibly running Job, yet %+v for %+v", d, ev)
		case ev.Paused && d.Action == ActionStart:
			t.Fatalf("a paused object starts a Job: %+v", ev)
		case (ev.MoveDeletion || ev.Paused) && ev.Deleting && d.Operation == infrav1.OperationDestroy:
			t.Fatalf("I6: a move or paused deletion destroys: %+v", ev)
		case d.Action == ActionCleanupAndRemoveFinalizer && ev.StateExists && !ev.Destroyed:
			t.Fatalf("I6: state would be deleted without a successful destroy: %+v", ev)
		case d.ClearBlockMove && !ev.Paused && !ev.Deleting:
			t.Fatalf("block-move cleared in a normal pass: %+v", ev)
		case ev.Deleting && len(ev.Children) > 0 && !ev.MoveDeletion && !busy && !ev.Paused && (d.Action == ActionStart || d.Action == ActionCleanupAndRemoveFinalizer):
			t.Fatalf("a cluster deletion went ahead of its machines: %+v", ev)
		case d.SetBlockMove && d.ClearBlockMove:
			t.Fatalf("contradictory decision %+v", d)
		}
	}
}

func TestNeedsLagCheck(t *testing.T) {
	cases := []struct {
		ev   Evidence
		want bool
	}{
		{Evidence{}, false},
		{Evidence{BlockMove: true}, false}, // a normal pass keeps block-move: nothing to confirm
		{Evidence{BlockMove: true, Paused: true}, true},
		{Evidence{ActiveJob: "j"}, true},
		{Evidence{Deleting: true}, true},
		{Evidence{Deleting: true, Running: []JobView{{Name: "j"}}}, false},
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
