package engine

import (
	"fmt"
	"testing"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// settled is the evidence of an object with its finalizer, no Job in the cache, the live
// checks made where they were needed (and found nothing), and the decision inputs read.
func settled(ev Evidence) Evidence {
	ev.HasFinalizer = true
	ev.Lag = LagView{Checked: NeedsLagCheck(ev)}
	ev.Gathered = NeedsDecisionInputs(ev)
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
			Evidence{DesiredHash: "h1"},
			Decision{Action: ActionAddFinalizer}},
		{"a deleting object without the finalizer is left alone",
			Evidence{Deleting: true, BlockMove: true},
			Decision{Action: ActionNone}},
		{"a running Job keeps the marks and waits",
			Evidence{HasFinalizer: true, Running: running, BlockMove: true, ActiveJob: "captf-x-3"},
			Decision{Action: ActionWaitJob}},
		{"a running Job restores a missing block-move and activeJob",
			Evidence{HasFinalizer: true, Running: running},
			Decision{Action: ActionWaitJob, SetBlockMove: true, SetActiveJob: "captf-x-3"}},
		{"a running Job of a paused, deleting object still keeps the marks",
			Evidence{HasFinalizer: true, Running: running, Paused: true, Deleting: true, BlockMove: true, ActiveJob: "captf-x-3"},
			Decision{Action: ActionWaitJob}},
		{"a finished Job whose pod still runs keeps the marks",
			Evidence{HasFinalizer: true, Current: finished, CurrentPods: PodsRunning, ActiveJob: "captf-x-3"},
			Decision{Action: ActionWaitJob, SetBlockMove: true}},
		{"a finished Job whose pods were not listed is not counted",
			Evidence{HasFinalizer: true, Current: finished, BlockMove: true},
			Decision{Action: ActionWaitJob}},
		{"a finished Job with terminal pods is counted, clearing its own activeJob",
			Evidence{HasFinalizer: true, Current: finished, CurrentPods: PodsTerminal, BlockMove: true, ActiveJob: "captf-x-3"},
			Decision{Action: ActionBookkeep, Operation: infrav1.OperationApply, ClearActiveJob: true}},
		{"counting a Job leaves an activeJob naming another Job alone",
			Evidence{HasFinalizer: true, Current: finished, CurrentPods: PodsTerminal, BlockMove: true, ActiveJob: "captf-x-2"},
			Decision{Action: ActionBookkeep, Operation: infrav1.OperationApply}},
		{"lag found changes nothing",
			Evidence{HasFinalizer: true, Lag: LagView{Checked: true, Found: true}, BlockMove: true, ActiveJob: "captf-x-3", Paused: true},
			Decision{Action: ActionWaitLag}},
		{"a clear without the live checks waits instead",
			Evidence{HasFinalizer: true, BlockMove: true, ActiveJob: "captf-x-3", Paused: true},
			Decision{Action: ActionWaitLag}},
		{"paused and idle clears block-move and activeJob",
			settled(Evidence{Paused: true, BlockMove: true, ActiveJob: "captf-x-3", DesiredHash: "h2", AppliedHash: "h1"}),
			Decision{Action: ActionWait, ClearBlockMove: true, ClearActiveJob: true}},
		{"changed inputs start an apply and set block-move",
			settled(Evidence{DesiredHash: "h2", AppliedHash: "h1"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, SetBlockMove: true}},
		{"changed inputs after a finished Job clear its activeJob and start",
			settled(Evidence{DesiredHash: "h2", AppliedHash: "h1", BlockMove: true, ActiveJob: "captf-x-2"}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply, ClearActiveJob: true}},
		{"unchanged inputs stay idle, keeping block-move",
			settled(Evidence{DesiredHash: "h1", AppliedHash: "h1", BlockMove: true, Provisioned: true}),
			Decision{Action: ActionIdle}},
		{"a lost status is rebuilt from the state without a Job",
			settled(Evidence{DesiredHash: "h1", AppliedHash: "h1", BlockMove: true}),
			Decision{Action: ActionRecoverStatus}},
		{"decision inputs not read: nothing starts",
			Evidence{HasFinalizer: true, DesiredHash: "h2", AppliedHash: "h1", BlockMove: true},
			Decision{Action: ActionWait}},
		{"a failed apply backs off",
			settled(Evidence{DesiredHash: "h2", AppliedHash: "h1", BlockMove: true, RetryAt: now.Add(time.Minute)}),
			Decision{Action: ActionWait}},
		{"backoff over: apply again",
			settled(Evidence{DesiredHash: "h2", AppliedHash: "h1", BlockMove: true, RetryAt: now.Add(-time.Second)}),
			Decision{Action: ActionStart, Operation: infrav1.OperationApply}},
		{"a dependency wait starts nothing",
			settled(Evidence{DesiredHash: "h2", BlockMove: true, DependencyWait: &Wait{Reason: infrav1.WaitingForClusterInfrastructureReason}}),
			Decision{Action: ActionWait}},
		{"bad inputs start nothing",
			settled(Evidence{BlockMove: true, InputsProblem: &Problem{Reason: infrav1.InputsTooLargeReason}}),
			Decision{Action: ActionWait}},
		{"deleting with state destroys",
			settled(Evidence{Deleting: true, StateExists: true, BlockMove: true}),
			Decision{Action: ActionStart, Operation: infrav1.OperationDestroy}},
		{"deleting cluster waits for its machines",
			settled(Evidence{Deleting: true, StateExists: true, BlockMove: true, Children: []string{"TerraformMachine/m1"}}),
			Decision{Action: ActionWait}},
		{"destroyed: clean up and let go",
			settled(Evidence{Deleting: true, StateExists: true, Destroyed: true, BlockMove: true}),
			Decision{Action: ActionCleanup, ClearBlockMove: true}},
		{"never applied: let go without a destroy",
			settled(Evidence{Deleting: true, BlockMove: true}),
			Decision{Action: ActionCleanup, ClearBlockMove: true}},
		{"a move deletion never destroys",
			settled(Evidence{Deleting: true, MoveDeletion: true, StateExists: true, BlockMove: true}),
			Decision{Action: ActionRemoveFinalizer, ClearBlockMove: true}},
		{"a paused deletion never destroys",
			settled(Evidence{Deleting: true, Paused: true, StateExists: true, BlockMove: true}),
			Decision{Action: ActionWait, ClearBlockMove: true}},
		{"a failed destroy backs off",
			settled(Evidence{Deleting: true, StateExists: true, BlockMove: true, RetryAt: now.Add(time.Minute)}),
			Decision{Action: ActionWait}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Now = now
			got := Decide(tc.ev)
			if got.Action != tc.want.Action || got.Operation != tc.want.Operation ||
				got.SetBlockMove != tc.want.SetBlockMove || got.ClearBlockMove != tc.want.ClearBlockMove ||
				got.ClearActiveJob != tc.want.ClearActiveJob || got.SetActiveJob != tc.want.SetActiveJob {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// space enumerates the full evidence space Decide can see: the object's marks and state, the
// current Job (absent, running, finished) and another running Job, the live pod listing, the
// live lag checks (not made, made and clean, made and lag found), whether the decision inputs
// were read, and every decision input. It calls visit with each combination (a mixed-radix
// counter over the dimensions).
func space(visit func(Evidence)) {
	curs := []*JobView{nil, {Name: "j3", Seq: 3, Operation: infrav1.OperationApply, Phase: JobRunning},
		{Name: "j3", Seq: 3, Operation: infrav1.OperationDestroy, Phase: JobFinished}}
	actives := []string{"", "j3", "j2"}
	podsViews := []PodsView{PodsNotListed, PodsRunning, PodsTerminal}
	lags := []LagView{{}, {Checked: true}, {Checked: true, Found: true, Job: "j9"}}
	hashes := [][2]string{{"h1", "h1"}, {"h2", "h1"}, {"h1", ""}}
	// finalizer, deleting, paused, move, block-move, activeJob, provisioned, current, another
	// running Job, pods, lag, gathered, dependency wait, inputs problem, hashes, children,
	// state exists, destroyed, backoff.
	radix := []int{2, 2, 2, 2, 2, len(actives), 2, len(curs), 2, len(podsViews), len(lags), 2, 2, 2, len(hashes), 2, 2, 2, 2}
	total := 1
	for _, r := range radix {
		total *= r
	}
	digit := make([]int, len(radix))
	for n := 0; n < total; n++ {
		for i, rest := 0, n; i < len(radix); i++ {
			digit[i], rest = rest%radix[i], rest/radix[i]
		}
		on := func(i int) bool { return digit[i] == 1 }
		ev := Evidence{Now: now, HasFinalizer: on(0), Deleting: on(1), Paused: on(2), MoveDeletion: on(3), BlockMove: on(4),
			ActiveJob: actives[digit[5]], Provisioned: on(6), RunSeq: 3, Current: curs[digit[7]], CurrentPods: podsViews[digit[9]],
			Lag: lags[digit[10]], Gathered: on(11), DesiredHash: hashes[digit[14]][0], AppliedHash: hashes[digit[14]][1],
			StateExists: on(16), Destroyed: on(17)}
		if ev.Current != nil && ev.Current.Phase == JobRunning {
			ev.Running = append(ev.Running, *ev.Current)
		}
		if on(8) {
			ev.Running = append(ev.Running, JobView{Name: "j2", Seq: 2, Operation: infrav1.OperationApply, Phase: JobRunning})
		}
		if on(12) {
			ev.DependencyWait = &Wait{Reason: infrav1.WaitingForClusterReason}
		}
		if on(13) {
			ev.InputsProblem = &Problem{Reason: infrav1.InvalidInputsReason}
		}
		if on(15) {
			ev.Children = []string{"TerraformMachine/m1"}
		}
		if on(18) {
			ev.RetryAt = now.Add(time.Minute)
		}
		visit(ev)
	}
}

// consistent reports evidence that gather can produce: pods listed exactly when NeedsPods,
// the lag checks made exactly when NeedsLagCheck, the decision inputs read exactly when
// NeedsDecisionInputs.
func consistent(ev Evidence) bool {
	if (ev.CurrentPods != PodsNotListed) != NeedsPods(ev) || ev.Lag.Checked != NeedsLagCheck(ev) {
		return false
	}
	return ev.Gathered == NeedsDecisionInputs(ev)
}

// violations checks one decision against the invariants (ARCHITECTURE.md I1-I4, I6 and the
// pause and move rules). It returns what the decision breaks.
func violations(ev Evidence, d Decision) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	cacheRuns := len(ev.Running) > 0
	if !ev.HasFinalizer && ev.Deleting {
		// The API server is deleting the object: nothing the controller decides can hold it.
		if d.Action != ActionNone {
			bad("acts on an object that is gone")
		}
		return out
	}
	if !ev.HasFinalizer && len(ev.Running) > 0 && !ev.BlockMove && !d.SetBlockMove {
		bad("I2: adds the finalizer but not block-move while a Job runs")
	}
	podsRun := len(ev.Running) == 0 && ev.Current != nil && ev.Current.Phase == JobFinished && ev.CurrentPods != PodsTerminal
	lagUnknown := NeedsLagCheck(ev) && (!ev.Lag.Checked || ev.Lag.Found)
	mayRun := cacheRuns || podsRun || lagUnknown
	bookkeepsOwn := d.Action == ActionBookkeep && ev.CurrentPods == PodsTerminal && ev.ActiveJob == ev.Current.Name

	if mayRun && d.Action == ActionStart {
		bad("I1: starts a Job while one may run")
	}
	if (cacheRuns || podsRun) && ev.HasFinalizer && (d.ClearBlockMove || !(ev.BlockMove || d.SetBlockMove)) {
		bad("I2: a Job runs and block-move is not kept")
	}
	if mayRun && (d.Action == ActionRemoveFinalizer || d.Action == ActionCleanup) {
		bad("I3: drops the finalizer while a Job may run")
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
	if d.Action != ActionAddFinalizer && d.Action != ActionNone && !ev.HasFinalizer {
		bad("acts on an object without its finalizer")
	}
	if d.Action == ActionStart && ev.Paused {
		bad("a paused object starts a Job")
	}
	if d.Action == ActionStart && !ev.Gathered {
		bad("starts a Job without its decision inputs")
	}
	if ev.Deleting && d.Action == ActionStart && d.Operation != infrav1.OperationDestroy {
		bad("a deleting object starts %s", d.Operation)
	}
	if ev.Deleting && (ev.MoveDeletion || ev.Paused) && d.Action == ActionStart {
		bad("I6: a move or paused deletion destroys")
	}
	if d.Action == ActionCleanup && (ev.StateExists && !ev.Destroyed || !ev.Gathered) {
		bad("I6: state would be deleted without a successful destroy")
	}
	if d.Action == ActionCleanup && len(ev.Children) > 0 {
		bad("a cluster deletion went ahead of its machines")
	}
	if d.ClearBlockMove && !ev.Paused && !ev.Deleting {
		bad("block-move cleared in a normal pass")
	}
	if d.SetBlockMove && d.ClearBlockMove {
		bad("contradictory block-move decision")
	}
	if d.Action == ActionStart && !ev.Deleting && (ev.DesiredHash == ev.AppliedHash || ev.Now.Before(ev.RetryAt) || ev.DependencyWait != nil || ev.InputsProblem != nil) {
		bad("starts an apply that nothing asks for")
	}
	return out
}

// TestDecideInvariantsOverTheWholeEvidenceSpace walks every combination of space and checks
// the invariants on each decision, whether or not gather could produce the combination, and
// that every action is reached by evidence gather can produce.
func TestDecideInvariantsOverTheWholeEvidenceSpace(t *testing.T) {
	reached := map[Action]int{}
	total, consistentTotal := 0, 0
	space(func(ev Evidence) {
		total++
		d := Decide(ev)
		if v := violations(ev, d); len(v) > 0 {
			t.Fatalf("%v: decision %+v for evidence %+v", v, d, ev)
		}
		if consistent(ev) {
			consistentTotal++
			reached[d.Action]++
		}
	})
	for _, a := range []Action{ActionNone, ActionAddFinalizer, ActionWaitJob, ActionBookkeep, ActionWaitLag, ActionStart,
		ActionIdle, ActionRecoverStatus, ActionWait, ActionRemoveFinalizer, ActionCleanup} {
		if reached[a] == 0 {
			t.Errorf("no evidence gather can produce reaches %s", a)
		}
	}
	t.Logf("%d combinations, %d of them producible by gather; actions reached: %v", total, consistentTotal, reached)
}

func TestNeedsLagCheck(t *testing.T) {
	cases := []struct {
		ev   Evidence
		want bool
	}{
		{Evidence{HasFinalizer: true}, false},
		{Evidence{HasFinalizer: true, BlockMove: true}, false}, // a normal pass keeps block-move: nothing to confirm
		{Evidence{HasFinalizer: true, BlockMove: true, Paused: true}, true},
		{Evidence{HasFinalizer: true, ActiveJob: "j"}, true},
		{Evidence{HasFinalizer: true, Deleting: true}, true},
		{Evidence{Deleting: true}, false}, // no finalizer: nothing left to clear
		{Evidence{HasFinalizer: true, Deleting: true, Running: []JobView{{Name: "j"}}}, false},
		{Evidence{HasFinalizer: true, Deleting: true, Current: &JobView{Name: "j", Phase: JobFinished}}, false}, // bookkeeping comes first
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
