package chaos_test

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// A schedule is one object's lifecycle under one seeded fault plan. Its seed alone decides
// the kind, the plan and the random draws the soak makes for it (how long its Jobs run); the
// interleaving with the managers' goroutines is not reproducible, so a replay runs the same
// plan, not the same interleaving.

// Managers of the soak: A from the start, B (the second manager, no leader election) from the
// step its plan says.
const (
	managerA = 0
	managerB = 1
)

// Steps of a schedule, in order. B first sees the object at the step plan.bJoins names.
const (
	stepCreate = iota
	stepChange
	stepDrift
	stepPause
	stepLoseState
	stepDelete
	stepRecreate
	stepDeleteAgain
	stepDone
)

var stepNames = []string{"create", "input change", "drift checks", "pause and unpause", "state loss and restore", "delete", "re-create", "delete again", "done"}

// Write points a fault can hit: the writes of a pass, named by what they write.
const (
	pointLease     = "lease"      // the run lease: create or update
	pointRelease   = "release"    // a lease deleted (released)
	pointMeta      = "meta"       // a metadata patch of the object (finalizer added, block-move and run sequence, bookkeeping)
	pointFinalizer = "finalizer"  // the metadata patch that removes the finalizer of a deleting object
	pointStatus    = "status"     // the status patch
	pointInputs    = "inputs"     // the durable inputs Secret
	pointJob       = "job"        // the Job create
	pointRunSecret = "run-secret" // the per-run Secret
	pointSecret    = "secret"     // another Secret write: state protection, backup, outputs, plan
	pointCleanup   = "cleanup"    // a Secret deleted (cleanup after a destroy, backups pruned)
)

var points = []string{pointLease, pointRelease, pointMeta, pointFinalizer, pointStatus, pointInputs, pointJob, pointRunSecret, pointSecret, pointCleanup}

// conflictable are the points whose writes carry a resourceVersion, so a conflict can answer them.
var conflictable = map[string]bool{pointLease: true, pointMeta: true, pointFinalizer: true, pointStatus: true, pointSecret: true}

// Fault modes of a write.
const (
	modeFail     = "fail"     // the API server refuses: the write does not happen
	modeLost     = "lost"     // the write happens, its response is lost (a timeout)
	modeConflict = "conflict" // a conflict: the write does not happen
	modeCrash    = "crash"    // the write happens, then the manager dies; it restarts after restartAfter
)

// writeFault hits the nth write at point by manager.
type writeFault struct {
	point   string
	nth     int
	manager int
	mode    string
}

func (w writeFault) String() string {
	return fmt.Sprintf("%s of write %d at %s by manager %s", w.mode, w.nth, w.point, managerName(w.manager))
}

func managerName(i int) string { return string(rune('A' + i)) }

// plan is a schedule's seeded fault plan.
type plan struct {
	seed int64
	kind string
	// hideJobs is, per manager, the probability that a read of the object's Jobs through its
	// cache misses a Job (created, not yet seen); lagObjects that a read of the object returns
	// the version the cache held before the current one.
	hideJobs, lagObjects [2]float64
	// bJoins is the step from which manager B's cache holds the object (stepCreate: from the
	// start); before it, B does not know the object.
	bJoins int
	// faults hit writes of this schedule's objects.
	faults []writeFault
	// failJobs are the ordinals (1-based, in creation order) of the schedule's Jobs that
	// fail, when they are applies or destroys.
	failJobs map[int]bool
	// restartAfter is how long a crashed manager stays down.
	restartAfter time.Duration
	// changeWhilePaused changes the inputs while the object is paused; loseState deletes the
	// state Secret (protection finalizer removed by hand) after the input change, changes the
	// inputs again, waits for the StateLost hold and restores the newest backup.
	changeWhilePaused, loseState bool
	// drift turns on drift checks every driftEvery in this mode at stepDrift and leaves them
	// on for the rest of the incarnation ("": no drift checks). The executor answers the
	// object's odd-numbered drift Jobs with drift found, so checks alternate between finding
	// drift and not, and under Remediate every other check is followed by an apply.
	drift      infrav1.DriftMode
	driftEvery time.Duration
}

// planOptions shape the plans of a run.
type planOptions struct {
	// noJobFailures keeps every Job successful: a failed Job waits a backoff of a minute
	// before its retry, too long for the slice in `make test`.
	noJobFailures bool
}

// newPlan draws the plan of seed.
func newPlan(seed int64, o planOptions) plan {
	r := rand.New(rand.NewSource(seed))
	p := plan{seed: seed, failJobs: map[int]bool{}}
	p.kind = []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind}[r.Intn(3)]
	for m := range p.hideJobs {
		p.hideJobs[m] = []float64{0, 0.1, 0.2, 0.3}[r.Intn(4)]
		p.lagObjects[m] = []float64{0, 0.1, 0.2, 0.4}[r.Intn(4)]
	}
	if r.Intn(2) == 1 {
		p.bJoins = 1 + r.Intn(stepDeleteAgain)
	}
	n := []int{0, 0, 1, 1, 1, 2, 2, 3}[r.Intn(8)]
	for i := 0; i < n; i++ {
		f := writeFault{point: points[r.Intn(len(points))], nth: 1 + r.Intn(3), manager: r.Intn(2)}
		switch x := r.Intn(100); {
		case x < 35:
			f.mode = modeFail
		case x < 60:
			f.mode = modeLost
		case x < 80 && conflictable[f.point]:
			f.mode = modeConflict
		case x < 80:
			f.mode = modeFail
		default:
			f.mode = modeCrash
		}
		p.faults = append(p.faults, f)
	}
	if x := r.Intn(100); x < 15 && !o.noJobFailures {
		p.failJobs[1+r.Intn(5)] = true
	}
	p.restartAfter = time.Duration(200+r.Intn(1800)) * time.Millisecond
	p.changeWhilePaused = r.Intn(2) == 1
	p.loseState = r.Intn(100) < 12
	// Drawn last, so the draws above are those of the plans before drift checks existed.
	switch x := r.Intn(100); {
	case x < 30:
		p.drift = infrav1.DriftModeReport
	case x < 60:
		p.drift = infrav1.DriftModeRemediate
	}
	p.driftEvery = time.Duration(2+r.Intn(3)) * time.Second
	return p
}

// faultAt returns the fault of the nth write at point by manager, if the plan has one.
func (p plan) faultAt(point string, manager, nth int) (writeFault, bool) {
	for _, f := range p.faults {
		if f.point == point && f.manager == manager && f.nth == nth {
			return f, true
		}
	}
	return writeFault{}, false
}

func (p plan) String() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%s; Jobs hidden A %.0f%% B %.0f%%; objects one version old A %.0f%% B %.0f%%; B joins at %s",
		p.kind, 100*p.hideJobs[0], 100*p.hideJobs[1], 100*p.lagObjects[0], 100*p.lagObjects[1], stepNames[p.bJoins]))
	for _, f := range p.faults {
		parts = append(parts, f.String())
	}
	var fails []int
	for n := range p.failJobs {
		fails = append(fails, n)
	}
	sort.Ints(fails)
	for _, n := range fails {
		parts = append(parts, fmt.Sprintf("Job %d fails (if an apply or destroy)", n))
	}
	if p.changeWhilePaused {
		parts = append(parts, "inputs change while paused")
	}
	if p.loseState {
		parts = append(parts, "state lost and restored")
	}
	if p.drift != "" {
		parts = append(parts, fmt.Sprintf("drift checks every %s, mode %s", p.driftEvery, p.drift))
	}
	return strings.Join(parts, "; ")
}

// planned lists the fault types the plan puts in its schedule. Which of them are carried out
// depends on the interleaving (a write fault hits the nth write of one manager at a point,
// which the other manager may make instead), so the slice checks what its seed plans, and
// counts what was injected.
func (p plan) planned() map[string]bool {
	out := map[string]bool{}
	if p.hideJobs[0] > 0 || p.hideJobs[1] > 0 {
		out[faultJobHidden] = true
	}
	if p.lagObjects[0] > 0 || p.lagObjects[1] > 0 {
		out[faultObjectOld] = true
	}
	if p.bJoins > 0 {
		out[faultLateJoin] = true
	}
	for _, f := range p.faults {
		out[map[string]string{modeFail: faultFail, modeLost: faultLost, modeConflict: faultConflict, modeCrash: faultCrash}[f.mode]] = true
	}
	if len(p.failJobs) > 0 {
		out[faultJobFailed] = true
	}
	if p.loseState {
		out[faultStateLost] = true
	}
	return out
}
