package decide

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

func TestDriftDueAtCountsFromTheLastCheckWithAJitterOfAtMostTenPercent(t *testing.T) {
	last := now.Add(-time.Hour)
	started := now.Add(-2 * time.Hour) // the manager ran when the checks fell due
	spread := map[time.Duration]bool{}
	for i := 0; i < 100; i++ {
		due := DriftDueAt(last, time.Time{}, started, time.Minute, types.UID(fmt.Sprintf("uid-%d", i)))
		delay := due.Sub(last)
		if delay < time.Minute || delay >= time.Minute+6*time.Second {
			t.Fatalf("object %d due %s after its last check, want within [1m, 1m6s)", i, delay)
		}
		spread[delay.Truncate(time.Second)] = true
		if again := DriftDueAt(last, time.Time{}, started, time.Minute, types.UID(fmt.Sprintf("uid-%d", i))); !again.Equal(due) {
			t.Fatalf("object %d: the schedule is not deterministic (%s, then %s)", i, due, again)
		}
	}
	if len(spread) < 5 {
		t.Errorf("100 objects fall due in %d distinct seconds; the jitter must spread them", len(spread))
	}
}

func TestDriftDueAtSpreadsChecksThatFellDueBeforeTheManagerStarted(t *testing.T) {
	// 100 objects last checked long ago, a manager (re)started now: at most 10% may be due in
	// the first 6 seconds of a 1-minute interval.
	started := now
	first := 0
	for i := 0; i < 100; i++ {
		due := DriftDueAt(now.Add(-time.Hour), time.Time{}, started, time.Minute, types.UID(fmt.Sprintf("uid-%d", i)))
		if due.Before(started) || !due.Before(started.Add(OverdueSpread*time.Minute)) {
			t.Fatalf("object %d due at %s, want within %d intervals after the start", i, due.Sub(started), OverdueSpread)
		}
		if due.Before(started.Add(6 * time.Second)) {
			first++
		}
	}
	if first > 10 {
		t.Errorf("%d of 100 overdue checks fall in the first 6 s after a restart, want at most 10", first)
	}
}

func TestDriftDueAtIsOffWithoutAnInterval(t *testing.T) {
	if due := DriftDueAt(now, now, now, 0, "uid"); !due.IsZero() {
		t.Errorf("due %s with interval 0, want never", due)
	}
	if due := DriftDueAt(time.Time{}, now.Add(-time.Minute), now.Add(-time.Hour), time.Hour, "uid"); due.Before(now.Add(59 * time.Minute)) {
		t.Errorf("a never-checked object is due %s after its creation, want about an interval", due.Sub(now.Add(-time.Minute)))
	}
}

func TestJobsToPruneKeepsTheNewestPerOperationAndOutcome(t *testing.T) {
	c := func(name string, seq int64, op string, ok bool) HistoryCandidate {
		return HistoryCandidate{Name: name, Seq: seq, Operation: opOf(op), Succeeded: ok, Counted: true, Finished: true}
	}
	cands := []HistoryCandidate{
		c("a1", 1, "Apply", true), c("a2", 2, "Apply", false), c("a3", 3, "Apply", true), c("a4", 4, "Apply", false),
		c("d5", 5, "Drift", true), c("d6", 6, "Drift", true), c("d7", 7, "Drift", true),
	}
	running := HistoryCandidate{Name: "d8", Seq: 8, Operation: opOf("Drift"), Succeeded: false, Counted: true, Finished: false}
	uncounted := HistoryCandidate{Name: "a9", Seq: 9, Operation: opOf("Apply"), Succeeded: true, Counted: false, Finished: true}
	foreign := HistoryCandidate{Name: "old-1", Seq: 1, Operation: opOf("Drift"), Succeeded: true, Counted: true, Finished: true, Foreign: true}
	got := JobsToPrune(append(cands, running, uncounted, foreign), 1, 1)
	want := []string{"a1", "a2", "d5", "d6"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("JobsToPrune = %v, want %v", got, want)
	}
	if got := JobsToPrune(cands, 0, 0); len(got) != len(cands) {
		t.Errorf("with limits 0 every finished counted Job goes: %v", got)
	}
}

func TestJobsToPruneNeverPicksARunningJob(t *testing.T) {
	// Fifty drift checks, the newest one still running: it stays whatever the limits.
	var cands []HistoryCandidate
	for i := int64(1); i <= 50; i++ {
		cands = append(cands, HistoryCandidate{Name: fmt.Sprintf("d%d", i), Seq: i, Operation: opOf("Drift"), Succeeded: true, Counted: true, Finished: i < 50})
	}
	for _, name := range JobsToPrune(cands, 0, 0) {
		if name == "d50" {
			t.Fatal("the running Job d50 was picked for pruning")
		}
	}
}

func opOf(s string) infrav1.Operation { return infrav1.Operation(s) }
