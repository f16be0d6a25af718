package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Managers of a schedule.
const (
	ManagerA = 0
	ManagerB = 1
)

// Write points: what a write writes (the chaos soak's names).
const (
	PointLease     = "lease"
	PointRelease   = "release"
	PointMeta      = "meta"
	PointFinalizer = "finalizer"
	PointStatus    = "status"
	PointInputs    = "inputs"
	PointJob       = "job"
	PointRunSecret = "run-secret"
	PointSecret    = "secret"
	PointCleanup   = "cleanup"
)

// Points lists every write point.
var Points = []string{PointLease, PointRelease, PointMeta, PointFinalizer, PointStatus, PointInputs, PointJob, PointRunSecret, PointSecret, PointCleanup}

// Conflictable are the points whose writes carry a resourceVersion.
var Conflictable = map[string]bool{PointLease: true, PointMeta: true, PointFinalizer: true, PointStatus: true, PointSecret: true}

// Fault modes of a write (the chaos soak's names).
const (
	ModeFail     = "fail"     // refused: the write does not happen
	ModeLost     = "lost"     // the write happens, its response is lost (a timeout)
	ModeConflict = "conflict" // answered with a conflict: the write does not happen
	ModeCrash    = "crash"    // the write happens, then the manager dies
)

// WriteFault hits the Nth write at Point by Manager.
type WriteFault struct {
	Point   string
	Nth     int
	Manager int
	Mode    string
}

func (w WriteFault) String() string {
	return fmt.Sprintf("%s of write %d at %s by %s", w.Mode, w.Nth, w.Point, Name(w.Manager))
}

// Kill stops Manager at At (its goroutines end, its cache is dropped); a fresh manager with a
// cold cache starts Down later.
type Kill struct {
	At, Down time.Duration
	Manager  int
}

// Preempt runs a whole pass of the other manager right before the Nth request (any verb)
// Manager makes to the API server.
type Preempt struct {
	Nth     int
	Manager int
}

// Step kinds: what a person does.
const (
	StepChange  = "change inputs"
	StepPause   = "pause"
	StepUnpause = "unpause"
	StepDelete  = "delete"
)

// Step is one thing a person does At.
type Step struct {
	At   time.Duration
	What string
}

// Schedule is one seed's faults and steps.
type Schedule struct {
	Seed uint64
	// Lag is each manager's cache's largest event delay.
	Lag [2]time.Duration
	// BJoins is when manager B starts (0: with A).
	BJoins time.Duration
	Writes []WriteFault
	Kills  []Kill
	// Preempts interleave the managers' passes.
	Preempts []Preempt
	Steps    []Step
	// Crash, Kill and Overrun are the runner's percentages of runs that crash, are killed and
	// outrun their deadline.
	Crash, KillRun, Overrun int
	// Settle is when the steps and faults are over; the object must have converged (Ready, or
	// gone when deleted) by Settle plus the harness's bound.
	Settle time.Duration
}

// Name names a manager.
func Name(m int) string { return string(rune('A' + m)) }

// Draw is the schedule of seed.
func Draw(seed uint64) Schedule {
	r := rand.New(rand.NewPCG(seed, 0x5eed47))
	s := Schedule{Seed: seed}
	for m := range s.Lag {
		s.Lag[m] = []time.Duration{100 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}[r.IntN(4)]
	}
	if r.IntN(2) == 1 {
		s.BJoins = secs(r, 1, 120)
	}
	for range []int{0, 0, 1, 2, 2, 3, 4, 6}[r.IntN(8)] {
		s.Writes = append(s.Writes, writeFault(r))
	}
	for range []int{0, 0, 1, 1, 2, 3}[r.IntN(6)] {
		s.Kills = append(s.Kills, Kill{At: secs(r, 1, 300), Down: millis(r, 200, 20000), Manager: r.IntN(2)})
	}
	for range []int{0, 1, 2, 4, 8}[r.IntN(5)] {
		s.Preempts = append(s.Preempts, Preempt{Nth: 1 + r.IntN(60), Manager: r.IntN(2)})
	}
	s.Steps = steps(r)
	s.Crash = []int{0, 5, 10, 20}[r.IntN(4)]
	s.KillRun = []int{0, 5, 10}[r.IntN(3)]
	s.Overrun = []int{0, 5, 10}[r.IntN(3)]
	s.Settle = s.BJoins
	for _, k := range s.Kills {
		s.Settle = max(s.Settle, k.At+k.Down)
	}
	for _, st := range s.Steps {
		s.Settle = max(s.Settle, st.At)
	}
	return s
}

func writeFault(r *rand.Rand) WriteFault {
	f := WriteFault{Point: Points[r.IntN(len(Points))], Nth: 1 + r.IntN(3), Manager: r.IntN(2)}
	switch x := r.IntN(100); {
	case x < 35:
		f.Mode = ModeFail
	case x < 60:
		f.Mode = ModeLost
	case x < 80 && Conflictable[f.Point]:
		f.Mode = ModeConflict
	case x < 80:
		f.Mode = ModeFail
	default:
		f.Mode = ModeCrash
	}
	return f
}

// steps draws a person's steps: an input change, a pause (with a change inside it, or not),
// a delete, each in about half of the schedules, in that order.
func steps(r *rand.Rand) []Step {
	var out []Step
	at := time.Duration(0)
	if r.IntN(2) == 1 {
		at += secs(r, 5, 180)
		out = append(out, Step{At: at, What: StepChange})
	}
	if r.IntN(5) < 2 {
		at += secs(r, 1, 120)
		out = append(out, Step{At: at, What: StepPause})
		if r.IntN(2) == 1 {
			at += secs(r, 1, 30)
			out = append(out, Step{At: at, What: StepChange})
		}
		at += secs(r, 1, 60)
		out = append(out, Step{At: at, What: StepUnpause})
	}
	if r.IntN(2) == 1 {
		at += secs(r, 1, 240)
		out = append(out, Step{At: at, What: StepDelete})
	}
	return out
}

func secs(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+r.IntN(hi-lo)) * time.Second
}

func millis(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+r.IntN(hi-lo)) * time.Millisecond
}

// Deleted reports whether the schedule deletes the object.
func (s Schedule) Deleted() bool {
	return len(s.Steps) > 0 && s.Steps[len(s.Steps)-1].What == StepDelete
}

// FaultAt is the fault of the nth write at point by manager, if any.
func (s Schedule) FaultAt(point string, manager, nth int) (WriteFault, bool) {
	for _, f := range s.Writes {
		if f.Point == point && f.Manager == manager && f.Nth == nth {
			return f, true
		}
	}
	return WriteFault{}, false
}

// PreemptAt reports whether the other manager runs a pass before manager's nth request.
func (s Schedule) PreemptAt(manager, nth int) bool {
	for _, p := range s.Preempts {
		if p.Manager == manager && p.Nth == nth {
			return true
		}
	}
	return false
}

func (s Schedule) String() string {
	parts := []string{fmt.Sprintf("seed %d: cache lag A %v B %v; B joins at %v; runs crash %d%% killed %d%% overrun %d%%",
		s.Seed, s.Lag[0], s.Lag[1], s.BJoins, s.Crash, s.KillRun, s.Overrun)}
	for _, f := range s.Writes {
		parts = append(parts, f.String())
	}
	for _, k := range s.Kills {
		parts = append(parts, fmt.Sprintf("%s killed at %v, down %v", Name(k.Manager), k.At, k.Down))
	}
	for _, p := range s.Preempts {
		parts = append(parts, fmt.Sprintf("%s's pass before request %d of %s", Name(1-p.Manager), p.Nth, Name(p.Manager)))
	}
	for _, st := range s.Steps {
		parts = append(parts, fmt.Sprintf("%s at %v", st.What, st.At))
	}
	return strings.Join(parts, "; ")
}
