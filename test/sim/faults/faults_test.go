package faults_test

import (
	"testing"

	"github.com/captf/cluster-api-provider-terraform/test/sim/faults"
)

// TestDrawKeepsItsInvariants draws many schedules and checks what doc.go promises.
func TestDrawKeepsItsInvariants(t *testing.T) {
	modes := map[string]int{}
	for seed := uint64(0); seed < 2000; seed++ {
		s := faults.Draw(seed)
		if again := faults.Draw(seed); again.String() != s.String() {
			t.Fatalf("seed %d drew two schedules:\n%s\n%s", seed, s, again)
		}
		paused := false
		for i, st := range s.Steps {
			if i > 0 && st.At < s.Steps[i-1].At {
				t.Errorf("seed %d: steps out of order: %s", seed, s)
			}
			if i > 0 && s.Steps[i-1].What == faults.StepDelete {
				t.Errorf("seed %d: a step after the delete: %s", seed, s)
			}
			switch st.What {
			case faults.StepPause:
				paused = true
			case faults.StepUnpause:
				paused = false
			}
			if st.At > s.Settle {
				t.Errorf("seed %d: step %s after Settle %v", seed, st.What, s.Settle)
			}
		}
		if paused {
			t.Errorf("seed %d: paused and never unpaused: %s", seed, s)
		}
		for _, k := range s.Kills {
			if k.At+k.Down > s.Settle {
				t.Errorf("seed %d: a restart after Settle: %s", seed, s)
			}
		}
		for _, f := range s.Writes {
			modes[f.Mode]++
			if f.Mode == faults.ModeConflict && !faults.Conflictable[f.Point] {
				t.Errorf("seed %d: a conflict at %s, whose writes carry no resourceVersion", seed, f.Point)
			}
		}
	}
	for _, m := range []string{faults.ModeFail, faults.ModeLost, faults.ModeConflict, faults.ModeCrash} {
		if modes[m] == 0 {
			t.Errorf("no schedule of 2000 drew mode %s", m)
		}
	}
	if faults.Draw(1).String() == faults.Draw(2).String() {
		t.Error("seeds 1 and 2 drew the same schedule")
	}
}
