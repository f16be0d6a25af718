package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/cachelag"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
)

// The soak (`make soak`, and a fixed slice of it in `make test`): many seeded schedules at
// once against one API server, two managers without leader election, every fault of the
// schedules' plans, and the monitor checking I1-I5 and I7 over the whole run. A schedule that
// does not reach the end of its lifecycle within stepTimeout per step breaks L1 and fails the
// run too.
//
// Environment (read by the spec; `make soak` sets the first two):
//   - CAPTF_SOAK_SCHEDULES: how many schedules (default: the slice, sliceSchedules);
//   - CAPTF_SOAK_SEED: the seed of schedule 0; schedule i has seed+i (default sliceSeed; when
//     CAPTF_SOAK_SCHEDULES is set, the time);
//   - CAPTF_SOAK_PARALLEL: schedules in flight at once (default 96; the slice runs all at once);
//   - CAPTF_SOAK_CELL: schedules per namespace (default 4);
//   - CAPTF_SOAK_LOG_DIR: when set, each manager incarnation writes its log (JSON, verbosity 1:
//     every pass's decision and every reconcile error) to DIR/<manager>-<restart>.log; by
//     default the soak drops the managers' logs.
const (
	sliceSchedules  = 8
	sliceSeed       = 1493 // seeds 1493-1500 plan every fault type (crashes, lost and refused writes, conflicts, a state loss, a late second manager) over the three kinds
	defaultParallel = 96
	defaultCell     = 4
	// stepTimeout bounds each step of a schedule (sliceStepTimeout in the slice).
	stepTimeout      = 10 * time.Minute
	sliceStepTimeout = 3 * time.Minute
)

// soakConfig is what one run does.
type soakConfig struct {
	schedules, parallel, cell int
	seed                      int64
	// slice: the fixed slice of `make test` (no Job failures: their backoff is a minute).
	slice bool
	// step bounds each step of a schedule: a schedule still waiting then did not converge.
	step time.Duration
	// logDir, when set, keeps each manager incarnation's log there (CAPTF_SOAK_LOG_DIR).
	logDir string
}

func soakConfigFromEnv() (soakConfig, error) {
	c := soakConfig{schedules: sliceSchedules, seed: sliceSeed, parallel: sliceSchedules, cell: defaultCell, slice: true, step: sliceStepTimeout}
	num := func(name string, into *int) error {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%s=%q: want a positive number", name, v)
		}
		*into = n
		return nil
	}
	if os.Getenv("CAPTF_SOAK_SCHEDULES") != "" {
		c.slice, c.parallel, c.seed, c.step = false, defaultParallel, time.Now().UnixNano()%1_000_000_000, stepTimeout
	}
	for name, into := range map[string]*int{"CAPTF_SOAK_SCHEDULES": &c.schedules, "CAPTF_SOAK_PARALLEL": &c.parallel, "CAPTF_SOAK_CELL": &c.cell} {
		if err := num(name, into); err != nil {
			return c, err
		}
	}
	if v := os.Getenv("CAPTF_SOAK_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("CAPTF_SOAK_SEED=%q: want a number", v)
		}
		c.seed = n
	}
	c.logDir = os.Getenv("CAPTF_SOAK_LOG_DIR")
	return c, nil
}

// soak is one run.
type soak struct {
	cfg    soakConfig
	prefix string
	// view is the test's own cache of the three kinds, for the schedules' waits.
	view     cache.Cache
	managers [2]*role

	mu        sync.RWMutex
	byObject  map[string]*schedule // "Kind/namespace/name"
	bySuffix  map[string]*schedule
	faults    map[string]*atomic.Int64
	schedules []*schedule
	cells     []*cell

	execMu   sync.Mutex
	execErrs []error
	// wakes holds, per object the soak waits on ("Kind/namespace/name"), the channel its waiter
	// selects on: the view's event handlers and the executor's counters signal it (wakeKey), so
	// a wait re-checks its condition when something it reads changed instead of polling.
	wakes sync.Map
	// refusedRuns counts the Jobs whose state channel (played by refusal) refused the state.
	refusedRuns atomic.Int64
	// reportNewInputs counts the applies of new inputs during Report drift steps (see
	// schedule.newInputs): counted, not failures.
	reportNewInputs atomic.Int64
}

// cell is one namespace of the run: a Cluster "c" whose TerraformCluster is the first
// cluster-kind schedule of the cell (or, without one, a fault-free base cluster), with the
// cell's machine and pool schedules as its members; further cluster-kind schedules get a
// Cluster of their own.
type cell struct {
	idx       int
	ns        string
	schedules []*schedule
	subject   *schedule
	members   sync.WaitGroup
}

// schedule is one object's lifecycle under its plan.
type schedule struct {
	s       *soak
	idx     int
	seed    int64
	plan    plan
	cell    *cell
	ns      string
	name    string
	cluster string
	member  bool
	step    atomic.Int32
	jobs    atomic.Int32
	// drifts counts the drift Jobs the executor played for the object (odd ones find drift);
	// applies its apply Jobs; remediations the applies that followed drift found under
	// Remediate during stepDrift.
	drifts, applies, remediations atomic.Int32
	// reportApplies is the evidence of every apply the executor played during a Report drift
	// step (driftOn is when the step turned the checks on, driftFrom the applied hash then):
	// enough to tell an apply of the step from a late one of the previous step, and a
	// re-apply of the same inputs from one of new inputs.
	driftOn       time.Time
	driftFrom     string
	reportApplies []string
	// reapplies counts the applies of a Report step that ran the inputs applied when their Job
	// came (what a remediation would run: a Report violation); newInputs those that ran other
	// inputs (a contract input changed, for a member often through its cell's TerraformCluster:
	// a legitimate apply, not a reaction to drift). The reference is the object's applied hash
	// when the executor plays the Job, not the one at the step's start: inputs that change and
	// change back (seed 612400101's schedule 107, a pool whose cell's TerraformCluster lost and
	// restored its state) are two applies of new inputs.
	reapplies, newInputs int
	// owner is the Machine or MachinePool of a member, created with its first incarnation.
	owner client.Object

	// wake is signalled when the object or the executor's counters of it change (wakeKey).
	wake chan struct{}
	// nudge: a manager was served an old version of the object (see lagging).
	nudge atomic.Bool

	// began and ended bound the schedule's run, took the time of each step, for the summary's
	// latencies.
	began, ended time.Time
	took         [stepDone]time.Duration

	mu       sync.Mutex
	rng      *rand.Rand
	writes   map[string]int
	versions [2]struct{ prev, cur client.Object }
	err      error
}

func (sc *schedule) key() string { return sc.plan.kind + "/" + sc.ns + "/" + sc.name }

// draw is a random number of the schedule's own seeded source.
func (sc *schedule) draw() float64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.rng.Float64()
}

// countWrite counts the writes at point by manager m and returns this one's number.
func (sc *schedule) countWrite(point string, m int) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	k := point + "/" + managerName(m)
	sc.writes[k]++
	return sc.writes[k]
}

// lagging returns, with the plan's probability for manager m, the version of obj that m's cache
// held before the current one (an informer one event behind), never one of another
// incarnation.
func (sc *schedule) lagging(m int, obj client.Object) client.Object {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	v := &sc.versions[m]
	if v.cur == nil || v.cur.GetResourceVersion() != obj.GetResourceVersion() {
		v.prev, v.cur = v.cur, obj.DeepCopyObject().(client.Object)
	}
	if v.prev == nil || v.prev.GetUID() != obj.GetUID() || sc.plan.lagObjects[m] == 0 || sc.rng.Float64() >= sc.plan.lagObjects[m] {
		return nil
	}
	sc.nudge.Store(true)
	return v.prev.DeepCopyObject().(client.Object)
}

// nudgeAnnotation is the soak's own annotation; the nudger bumps it.
const nudgeAnnotation = "soak.captf.io/nudge"

// nudgeLagged stands in for the event a lagging informer delivers once it catches up: a real
// cache never shows a reconcile an object older than the event that triggered it, so after a
// stale read the newer version's event is still to come. The double serves the old version
// from an up-to-date cache, whose event has passed; so every nudgeEvery the soak bumps an
// annotation of each object a manager was served stale, which sends the managers a new event.
func (s *soak) nudgeLagged(ctx context.Context) {
	const nudgeEvery = 500 * time.Millisecond
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(nudgeEvery):
		}
		n++
		for _, sc := range s.schedules {
			if !sc.nudge.Swap(false) {
				continue
			}
			o := newObject(sc.plan.kind)
			o.SetNamespace(sc.ns)
			o.SetName(sc.name)
			patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, nudgeAnnotation, n)))
			_ = k8s.Patch(ctx, o, patch) // gone or conflicting with a delete: nothing to wake
		}
	}
}

// wakeKey wakes whoever waits on the object named key ("Kind/namespace/name").
func (s *soak) wakeKey(key string) {
	if ch, ok := s.wakes.Load(key); ok {
		select {
		case ch.(chan struct{}) <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// wakeUp wakes the schedule's waiter.
func (sc *schedule) wakeUp() { sc.s.wakeKey(sc.key()) }

func (sc *schedule) replay() string {
	return fmt.Sprintf("make soak SEED=%d SCHEDULES=1", sc.seed)
}

func (sc *schedule) replayCell() string {
	first := sc.cell.schedules[0]
	return fmt.Sprintf("make soak SEED=%d SCHEDULES=%d SOAK_CELL=%d", first.seed, len(sc.cell.schedules), sc.s.cfg.cell)
}

var soakRuns atomic.Int64

func newSoak(cfg soakConfig) *soak {
	s := &soak{cfg: cfg, prefix: fmt.Sprintf("soak%d", soakRuns.Add(1)), byObject: map[string]*schedule{}, bySuffix: map[string]*schedule{},
		faults: map[string]*atomic.Int64{}}
	for _, f := range faultTypes {
		s.faults[f] = &atomic.Int64{}
	}
	opts := planOptions{noJobFailures: cfg.slice}
	for i := 0; i < cfg.schedules; i++ {
		if i%cfg.cell == 0 {
			c := &cell{idx: len(s.cells)}
			c.ns = fmt.Sprintf("%s-%d", s.prefix, c.idx)
			s.cells = append(s.cells, c)
		}
		c := s.cells[len(s.cells)-1]
		seed := cfg.seed + int64(i)
		sc := &schedule{s: s, idx: i, seed: seed, plan: newPlan(seed, opts), cell: c, ns: c.ns, cluster: "c",
			rng: rand.New(rand.NewSource(seed)), writes: map[string]int{}, wake: make(chan struct{}, 1)}
		switch sc.plan.kind {
		case infrav1.TerraformClusterKind:
			if c.subject == nil {
				c.subject, sc.name = sc, "c"
			} else {
				sc.name = fmt.Sprintf("c%d", len(c.schedules))
				sc.cluster = sc.name
			}
		case infrav1.TerraformMachineKind:
			sc.name, sc.member = fmt.Sprintf("m%d", len(c.schedules)), true
		default:
			sc.name, sc.member = fmt.Sprintf("p%d", len(c.schedules)), true
		}
		c.schedules = append(c.schedules, sc)
		s.schedules = append(s.schedules, sc)
		s.byObject[sc.key()] = sc
		s.wakes.Store(sc.key(), sc.wake)
		s.bySuffix[naming.StateSuffix(sc.ns, sc.plan.kind, sc.name)] = sc
	}
	return s
}

// newObject returns an empty object of kind.
func newObject(kind string) client.Object {
	switch kind {
	case infrav1.TerraformClusterKind:
		return &infrav1.TerraformCluster{}
	case infrav1.TerraformMachineKind:
		return &infrav1.TerraformMachine{}
	}
	return &infrav1.TerraformMachinePool{}
}

type terraformObject interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// current reads the schedule's object from the test's cache; nil when it is not there.
func (sc *schedule) current() (terraformObject, error) {
	o := newObject(sc.plan.kind)
	err := sc.s.view.Get(ctx, types.NamespacedName{Namespace: sc.ns, Name: sc.name}, o)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return o.(terraformObject), nil
}

// waitFor waits until cond holds for the object in the test's cache (nil: it does not exist).
// It re-checks whenever the view delivers an event of the object or the executor counts one of
// its Jobs (sc.wake), never on a timer: a condition that stops changing runs into the step's
// bound.
func (sc *schedule) waitFor(what string, cond func(o terraformObject) bool) error {
	deadline := time.NewTimer(sc.s.cfg.step)
	defer deadline.Stop()
	for {
		o, err := sc.current()
		if err != nil {
			return err
		}
		if cond(o) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sc.wake:
		case <-deadline.C:
			if o, err := sc.current(); err == nil && cond(o) {
				return nil
			}
			return fmt.Errorf("did not converge within %s: waiting for %s; %s", sc.s.cfg.step, what, sc.describe())
		}
	}
}

// describe says what the API server shows of the object and its Jobs, for failure messages.
func (sc *schedule) describe() string {
	o := newObject(sc.plan.kind)
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: sc.ns, Name: sc.name}, o); err != nil {
		return "object: " + err.Error()
	}
	st := o.(terraformObject).GetTerraformStatus()
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	var jobs []string
	list := &batchv1.JobList{}
	if err := k8s.List(ctx, list, client.InNamespace(sc.ns), client.MatchingLabels{infrav1.OwnerKindLabel: sc.plan.kind, infrav1.OwnerNameLabel: sc.name}); err == nil {
		for _, j := range list.Items {
			jobs = append(jobs, fmt.Sprintf("%s(%s, finished=%v)", j.Name, j.Labels[infrav1.OperationLabel], terminal(&j)))
		}
	}
	return fmt.Sprintf("annotations %v, finalizers %v, activeJob %+v, conditions %v, Jobs %v", o.GetAnnotations(), o.GetFinalizers(), st.ActiveJob, conds, jobs)
}

func appliedHash(o terraformObject) string {
	if o == nil {
		return ""
	}
	return o.GetAnnotations()[infrav1.AppliedHashAnnotation]
}

// appliedAfter holds once the object is provisioned with an applied hash other than prev.
func appliedAfter(prev string) func(terraformObject) bool {
	return func(o terraformObject) bool {
		return o != nil && o.GetTerraformStatus().IsProvisioned() && appliedHash(o) != "" && appliedHash(o) != prev
	}
}

func gone(o terraformObject) bool { return o == nil }

// updateBackoff paces update's retries: the managers write an object with drift checks on
// every few seconds, and the nudger too, so client-go's default four tries can all conflict.
var updateBackoff = wait.Backoff{Steps: 30, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// update changes the live object with fn, retrying on conflicts with the managers' writes.
func (sc *schedule) update(fn func(terraformObject)) error {
	return retry.RetryOnConflict(updateBackoff, func() error {
		o := newObject(sc.plan.kind)
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: sc.ns, Name: sc.name}, o); err != nil {
			return err
		}
		fn(o.(terraformObject))
		return k8s.Update(ctx, o)
	})
}

// changeInputs gives the object new variables; it returns the applied hash before the change.
func (sc *schedule) changeInputs(step int) (string, error) {
	o, err := sc.current()
	if err != nil {
		return "", err
	}
	prev := appliedHash(o)
	return prev, sc.update(func(o terraformObject) {
		o.GetTerraformSpec().Variables = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"seed":%d,"step":%d}`, sc.seed, step))}
	})
}

func setAnnotation(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// create makes the schedule's object (and, the first time, what it needs).
func (sc *schedule) create(first bool) error {
	var obj client.Object
	switch sc.plan.kind {
	case infrav1.TerraformClusterKind:
		c, tc := clusterObjects(sc.ns, sc.name, false)
		// The cell's Cluster "c" exists already (runCell); other cluster-kind schedules
		// bring a Cluster of their own.
		if first && sc.cluster == sc.name && sc.cell.subject != sc {
			if err := k8s.Create(ctx, c); err != nil {
				return err
			}
		}
		obj = tc
	case infrav1.TerraformMachineKind:
		boot, m, tm := machineObjects(sc.ns, sc.cluster, sc.name)
		if first {
			if err := createAll(boot, m); err != nil {
				return err
			}
			sc.owner = m
		}
		ownedBy(tm, sc.owner)
		obj = tm
	default:
		boot, mp, tp := poolObjects(sc.ns, sc.cluster, sc.name)
		if first {
			if err := createAll(boot, mp); err != nil {
				return err
			}
			sc.owner = mp
		}
		ownedBy(tp, sc.owner)
		obj = tp
	}
	return k8s.Create(ctx, obj)
}

func createAll(objs ...client.Object) error {
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (sc *schedule) delete() error {
	o := newObject(sc.plan.kind)
	o.SetNamespace(sc.ns)
	o.SetName(sc.name)
	return client.IgnoreNotFound(k8s.Delete(ctx, o))
}

// run walks the schedule through its lifecycle; the first step that fails ends it.
//
// A member that fails still deletes its object before it lets the cell's TerraformCluster
// go: otherwise that delete waits for the failed member's machine (DeletionBlocked,
// WaitingForMachines, as it must) and the run reports a second, derived non-convergence
// (schedule 25 of seed 839930415 was one: docs/development.md, "Soak").
func (sc *schedule) run() {
	sc.began = time.Now()
	defer func() { sc.ended = time.Now() }()
	if sc.member {
		defer sc.cell.members.Done()
	}
	for step := stepCreate; step < stepDone; step++ {
		sc.step.Store(int32(step))
		t := time.Now()
		err := sc.do(step)
		sc.took[step] = time.Since(t)
		if err != nil {
			sc.err = fmt.Errorf("step %q: %w", stepNames[step], err)
			if sc.member && step != stepDelete && step != stepDeleteAgain {
				// Unpaused first: a paused object's delete waits (decideDeletion).
				_ = sc.update(func(o terraformObject) { delete(o.GetAnnotations(), infrav1.PausedAnnotation) })
				if derr := sc.delete(); derr != nil {
					sc.err = fmt.Errorf("%w; deleting the object after the failure: %w", sc.err, derr)
				} else if werr := sc.waitFor("the destroy and the object gone, after the failure", gone); werr != nil {
					sc.err = fmt.Errorf("%w; after the failure: %w", sc.err, werr)
				}
			}
			return
		}
	}
	sc.step.Store(stepDone)
}

func (sc *schedule) do(step int) error {
	switch step {
	case stepCreate, stepRecreate:
		if err := sc.create(step == stepCreate); err != nil {
			return err
		}
		return sc.waitFor("the first apply", appliedAfter(""))
	case stepChange:
		prev, err := sc.changeInputs(step)
		if err != nil {
			return err
		}
		return sc.waitFor("the apply of the new inputs", appliedAfter(prev))
	case stepDrift:
		if sc.plan.drift == "" {
			return nil
		}
		return sc.checkDrift()
	case stepPause:
		return sc.pause()
	case stepLoseState:
		if !sc.plan.loseState {
			return nil
		}
		return sc.loseState()
	case stepDelete, stepDeleteAgain:
		if sc.cell.subject == sc {
			// Cluster API deletes a Cluster's infrastructure last: the members go first.
			sc.cell.members.Wait()
		}
		if err := sc.delete(); err != nil {
			return err
		}
		return sc.waitFor("the destroy and the object gone", gone)
	}
	return nil
}

// checkDrift turns on the plan's drift checks and waits for two checks (the first of them
// finding drift) and DriftDetected False after them: Remediated or NoDrift under Remediate,
// which must have applied, NoDrift under Report, which must not have. The checks stay on for
// the rest of the incarnation, so the monitor sees drift Jobs next to the input changes, the
// pause, the state loss and the destroy of the later steps.
func (sc *schedule) checkDrift() error {
	drifts, applies := sc.drifts.Load(), sc.applies.Load()
	if o, err := sc.current(); err == nil {
		sc.mu.Lock()
		sc.driftOn, sc.driftFrom = time.Now(), appliedHash(o)
		sc.mu.Unlock()
	}
	if err := sc.update(func(o terraformObject) {
		o.GetTerraformSpec().Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: sc.plan.driftEvery}, Mode: sc.plan.drift}
	}); err != nil {
		return err
	}
	if err := sc.waitFor("two drift checks, then DriftDetected False", func(o terraformObject) bool {
		if o == nil || sc.drifts.Load() < drifts+2 {
			return false
		}
		if sc.plan.drift == infrav1.DriftModeRemediate && sc.applies.Load() == applies {
			return false
		}
		c := meta.FindStatusCondition(o.GetTerraformStatus().Conditions, infrav1.DriftDetectedCondition)
		return c != nil && c.Status == metav1.ConditionFalse
	}); err != nil {
		return err
	}
	n := sc.applies.Load() - applies
	if sc.plan.drift == infrav1.DriftModeReport {
		// Report never re-applies the inputs it applied: that is what a remediation does. An
		// apply of new inputs during the step (seed 839930415's schedule 26: a member whose
		// contract inputs changed with its cell's TerraformCluster) is not a reaction to drift.
		sc.mu.Lock()
		reapplies, newInputs, evidence := sc.reapplies, sc.newInputs, strings.Join(sc.reportApplies, "; ")
		sc.mu.Unlock()
		sc.s.reportNewInputs.Add(int64(newInputs))
		if reapplies != 0 {
			return fmt.Errorf("mode Report applied the last applied inputs %d times after drift was found (%s); %s", reapplies, evidence, sc.describe())
		}
		return nil
	}
	sc.remediations.Add(n)
	return nil
}

// pause pauses the object, waits until it let go of block-move (nothing runs), maybe changes
// its inputs, and unpauses it.
func (sc *schedule) pause() error {
	if err := sc.update(func(o terraformObject) { setAnnotation(o, infrav1.PausedAnnotation, "") }); err != nil {
		return err
	}
	if err := sc.waitFor("block-move cleared while paused", func(o terraformObject) bool {
		_, bm := o.GetAnnotations()[infrav1.BlockMoveAnnotation]
		_, paused := o.GetAnnotations()[infrav1.PausedAnnotation]
		return o != nil && paused && !bm
	}); err != nil {
		return err
	}
	prev := ""
	if sc.plan.changeWhilePaused {
		var err error
		if prev, err = sc.changeInputs(100 + stepPause); err != nil {
			return err
		}
	}
	if err := sc.update(func(o terraformObject) {
		a := o.GetAnnotations()
		delete(a, infrav1.PausedAnnotation)
		o.SetAnnotations(a)
	}); err != nil {
		return err
	}
	if sc.plan.changeWhilePaused {
		return sc.waitFor("the apply of the inputs changed while paused", appliedAfter(prev))
	}
	return sc.waitFor("block-move back after the unpause", func(o terraformObject) bool {
		_, bm := o.GetAnnotations()[infrav1.BlockMoveAnnotation]
		return o != nil && bm
	})
}

// loseState deletes the object's state Secret by hand (its protection finalizer removed),
// changes the inputs, waits for the StateLost hold, restores the newest backup and waits for
// the apply of the new inputs.
func (sc *schedule) loseState() error {
	suffix := naming.StateSuffix(sc.ns, sc.plan.kind, sc.name)
	key := types.NamespacedName{Namespace: sc.ns, Name: naming.StateSecretName(suffix)}
	if err := deleteStateByHand(key, nil); err != nil {
		return err
	}
	sc.s.count(faultStateLost)
	prev, err := sc.changeInputs(stepLoseState)
	if err != nil {
		return err
	}
	if err := sc.waitFor("the StateLost hold", func(o terraformObject) bool {
		if o == nil {
			return false
		}
		c := meta.FindStatusCondition(o.GetTerraformStatus().Conditions, infrav1.StateReadableCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.StateLostReason
	}); err != nil {
		return err
	}
	o, err := sc.current()
	if err != nil || o == nil {
		return fmt.Errorf("read the held object: %v", err)
	}
	serial, err := newestBackup(sc.ns, sc.plan.kind, sc.name, o.GetUID())
	if err != nil {
		return err
	}
	if err := sc.update(func(o terraformObject) { setAnnotation(o, infrav1.RestoreStateAnnotation, serial) }); err != nil {
		return err
	}
	return sc.waitFor("the restore, then the apply of the new inputs", appliedAfter(prev))
}

// deleteStateByHand deletes a state Secret the way a person who means it does: it takes the
// protection finalizer off and deletes, and does so again until a read finds the Secret gone.
// A manager may put the finalizer back between those two writes (state.Keeper.Protect, when a
// pass counts a Job that touched the state): the delete then only marks the Secret for deletion,
// the state stays readable and the object keeps working (docs/state.md#protection), and a step
// that waits for the StateLost hold waits forever (seeds 900201116 and 900203128). between,
// when set, runs once between the first strip and the first delete (the regression spec puts
// the manager's Protect there).
func deleteStateByHand(key types.NamespacedName, between func() error) error {
	const attempts = 10
	for i := 0; i < attempts; i++ {
		secret := &corev1.Secret{}
		err := k8s.Get(ctx, key, secret)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the state: %w", err)
		}
		if len(secret.Finalizers) > 0 {
			secret.Finalizers = nil
			if err := k8s.Update(ctx, secret); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return fmt.Errorf("remove the state's protection: %w", err)
			}
		}
		if between != nil && i == 0 {
			if err := between(); err != nil {
				return err
			}
		}
		if secret.DeletionTimestamp == nil {
			if err := client.IgnoreNotFound(k8s.Delete(ctx, secret)); err != nil {
				return fmt.Errorf("delete the state: %w", err)
			}
		}
	}
	return fmt.Errorf("the state Secret %s is still there after %d attempts to strip its protection and delete it", key, attempts)
}

// newestBackup is the serial of the newest state backup this incarnation owns.
func newestBackup(ns, kind, name string, uid types.UID) (string, error) {
	list := &corev1.SecretList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup, infrav1.OwnerKindLabel: kind, infrav1.OwnerNameLabel: name}); err != nil {
		return "", err
	}
	best := int64(-1)
	for _, s := range list.Items {
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != uid {
			continue
		}
		if n, err := strconv.ParseInt(s.Annotations[infrav1.BackupSerialAnnotation], 10, 64); err == nil && n > best {
			best = n
		}
	}
	if best < 0 {
		return "", errors.New("the object has no state backup to restore")
	}
	return strconv.FormatInt(best, 10), nil
}

// jobRun is how the executor plays a Job of the run: the schedule's own draws say how long it
// runs, its plan whether it fails; a successful Job leaves the state a runner would leave.
func (s *soak) jobRun(j *batchv1.Job) (run, bool) {
	if !strings.HasPrefix(j.Namespace, s.prefix+"-") {
		return run{}, false
	}
	op := infrav1.Operation(j.Labels[infrav1.OperationLabel])
	r := run{delay: 100 * time.Millisecond, succeeded: true, refuse: func() (string, error) { return s.refusal(j) }}
	sc := s.scheduleOf(j)
	if sc != nil {
		n := int(sc.jobs.Add(1))
		r.delay = time.Duration(50+350*sc.draw()) * time.Millisecond
		if sc.plan.failJobs[n] && (op == infrav1.OperationApply || op == infrav1.OperationDestroy) {
			s.count(faultJobFailed)
			r.succeeded = false
			return r, true
		}
	}
	switch op {
	case infrav1.OperationDrift:
		// A drift check changes nothing: it leaves the state alone and reports in its result.
		found := true
		if sc != nil {
			found = sc.drifts.Add(1)%2 == 1
			sc.wakeUp() // the drift step's wait counts the checks
		}
		r.result = []byte(envtest.DriftResult(found))
		return r, true
	case infrav1.OperationApply:
		if sc != nil {
			sc.applies.Add(1)
			sc.noteReportApply(j)
			sc.wakeUp()
		}
	}
	r.writeState = func() error { return writeState(j, op) }
	return r, true
}

// noteReportApply records, for an apply played during a Report drift step, when its Job was
// created against the moment the step turned the checks on, the inputs it ran with against
// the applied hash then, the field manager that created it and the saved plan it named.
func (sc *schedule) noteReportApply(j *batchv1.Job) {
	if int(sc.step.Load()) != stepDrift || sc.plan.drift != infrav1.DriftModeReport {
		return
	}
	creator := ""
	if len(j.ManagedFields) > 0 {
		creator = j.ManagedFields[0].Manager
	}
	// The Job is not bookkept before it is played, so the object's applied hash is still the
	// one of the apply before it (read live; the step's start when the read fails).
	o := newObject(sc.plan.kind)
	getErr := k8s.Get(ctx, types.NamespacedName{Namespace: sc.ns, Name: sc.name}, o)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	applied := sc.driftFrom
	if getErr == nil {
		applied = o.GetAnnotations()[infrav1.AppliedHashAnnotation]
	}
	when := j.CreationTimestamp.Sub(sc.driftOn).Round(time.Millisecond)
	inputs := "new inputs"
	if j.Annotations[infrav1.InputsHashAnnotation] == applied {
		inputs = "the inputs already applied"
		sc.reapplies++
	} else {
		sc.newInputs++
	}
	sc.reportApplies = append(sc.reportApplies, fmt.Sprintf("Job %s created %s after the checks were turned on (second precision), by %q, with %s (hash %s, applied then %s, plan %q, remediate %q)",
		j.Name, when, creator, inputs, j.Annotations[infrav1.InputsHashAnnotation], applied, j.Annotations[infrav1.PlanIDAnnotation], j.Annotations[infrav1.RemediateAnnotation]))
}

// refusal plays the state channel's check at a Job's first request: a Job told a state
// lineage (jobs.StateLineageOf) is refused when the state Secret now holds no state, an
// unreadable one or another lineage, as the runner reports it.
func (s *soak) refusal(j *batchv1.Job) (string, error) {
	want := jobs.StateLineageOf(j)
	if want == "" {
		return "", nil
	}
	_, suffix := jobOwner(j)
	found := "no state"
	cur, err := state.Read(ctx, k8s, j.Namespace, suffix)
	switch _, unreadable := state.AsStateError(err); {
	case err == nil && cur.Lineage == want:
		return "", nil
	case err == nil:
		found = "lineage " + cur.Lineage
	case errors.Is(err, state.ErrNoState), unreadable:
	default:
		return "", err
	}
	s.refusedRuns.Add(1)
	return fmt.Sprintf("the state changed since the controller read it (lineage %s; the state Secret now holds %s): the state channel refused to serve it, so init stopped and changed nothing", want, found), nil
}

// writeState writes what a successful run leaves in the state Secret: an apply its outputs and
// a destroy nothing, each one serial past the current state (same lineage); a restore the
// backup the object's restore-state annotation names.
func writeState(j *batchv1.Job, op infrav1.Operation) error {
	owner, suffix := jobOwner(j)
	if op == infrav1.OperationRestore {
		o := newObject(j.Labels[infrav1.OwnerKindLabel])
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: owner}, o); err != nil {
			return err
		}
		serial, err := strconv.ParseInt(o.GetAnnotations()[infrav1.RestoreStateAnnotation], 10, 64)
		if err != nil {
			return fmt.Errorf("restore serial: %w", err)
		}
		b := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: naming.StateBackupSecretName(suffix, serial)}, b); err != nil {
			return err
		}
		return writeStateData(j.Namespace, suffix, b.Data[state.StateKey])
	}
	st := appliedState(j)
	st.Serial = 1
	cur, err := state.Read(ctx, k8s, j.Namespace, suffix)
	if err == nil {
		st.Serial, st.Lineage = cur.Serial+1, cur.Lineage
	}
	return statetest.Write(ctx, k8s, j.Namespace, suffix, st)
}

func writeStateData(ns, suffix string, data []byte) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		s := &corev1.Secret{}
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(suffix)}, s)
		if apierrors.IsNotFound(err) {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.StateSecretName(suffix)}, Data: map[string][]byte{state.StateKey: data}}
			return k8s.Create(ctx, s)
		}
		if err != nil {
			return err
		}
		s.Data = map[string][]byte{state.StateKey: data}
		return k8s.Update(ctx, s)
	})
}

// runCell runs the schedules of one namespace, then plays the garbage collector (envtest has
// none) so finished Jobs and the cell's leftovers do not fill the managers' caches.
func (s *soak) runCell(c *cell) {
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}); err != nil {
		s.failCell(c, fmt.Errorf("create namespace: %w", err))
		return
	}
	cl, base := clusterObjects(c.ns, "c", false)
	if err := k8s.Create(ctx, cl); err != nil {
		s.failCell(c, fmt.Errorf("create cluster: %w", err))
		return
	}
	baseWake := make(chan struct{}, 1)
	if c.subject == nil {
		key := infrav1.TerraformClusterKind + "/" + c.ns + "/" + base.GetName()
		s.wakes.Store(key, baseWake)
		defer s.wakes.Delete(key)
		if err := k8s.Create(ctx, base); err != nil {
			s.failCell(c, fmt.Errorf("create the base cluster: %w", err))
			return
		}
	}
	var wg sync.WaitGroup
	for _, sc := range c.schedules {
		if sc.member {
			c.members.Add(1)
		}
	}
	for _, sc := range c.schedules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.run()
		}()
	}
	var baseErr error
	if c.subject == nil {
		c.members.Wait()
		baseErr = s.deleteAndWait(base, baseWake, s.cfg.step)
	}
	wg.Wait()
	for _, sc := range c.schedules {
		if sc.err != nil || baseErr != nil {
			if baseErr != nil && sc.err == nil {
				sc.err = fmt.Errorf("the cell's base cluster: %w", baseErr)
			}
			return // leave the namespace as it is for the report
		}
	}
	if err := cleanNamespace(c.ns); err != nil {
		s.failCell(c, fmt.Errorf("clean up: %w", err))
	}
}

func (s *soak) failCell(c *cell, err error) {
	for _, sc := range c.schedules {
		if sc.err == nil {
			sc.err = err
		}
	}
}

// deleteAndWait deletes the fault-free base cluster and waits until the test's cache no longer
// holds it, re-checking at each of its events (wake).
func (s *soak) deleteAndWait(o client.Object, wake <-chan struct{}, timeout time.Duration) error {
	if err := client.IgnoreNotFound(k8s.Delete(ctx, o)); err != nil {
		return err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		err := s.view.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-deadline.C:
			return fmt.Errorf("base cluster %s/%s not gone within %s", o.GetNamespace(), o.GetName(), timeout)
		}
	}
}

// cleanNamespace deletes what the garbage collector would have: the Jobs and pods of objects
// that are gone, their Secrets, Leases and runner accounts, and the Cluster API objects.
func cleanNamespace(ns string) error {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, o := range []client.Object{&batchv1.Job{}, &corev1.Pod{}, &corev1.Secret{}, &coordinationv1.Lease{},
		&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &clusterv1.Machine{}, &clusterv1.MachinePool{}, &clusterv1.Cluster{}} {
		if err := k8s.DeleteAllOf(ctx, o, client.InNamespace(ns), bg); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T: %w", o, err)
		}
	}
	return nil
}

// startView starts the test's own cache of the three kinds.
func (s *soak) startView(vctx context.Context) error {
	v, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	// Every event of an object wakes its waiter; the store holds the new version before the
	// handlers run, so the waiter's re-check reads it.
	wake := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(client.Object); ok {
			s.wakeKey(kindOf(o) + "/" + o.GetNamespace() + "/" + o.GetName())
		}
	}
	for _, o := range []client.Object{&infrav1.TerraformCluster{}, &infrav1.TerraformMachine{}, &infrav1.TerraformMachinePool{}} {
		inf, err := v.GetInformer(vctx, o)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    wake,
			UpdateFunc: func(_, obj any) { wake(obj) },
			DeleteFunc: wake,
		}); err != nil {
			return err
		}
	}
	go func() { _ = v.Start(vctx) }()
	if !v.WaitForCacheSync(vctx) {
		return errors.New("the soak's cache did not sync")
	}
	s.view = v
	return nil
}

// execute runs every cell, at most cfg.parallel schedules in flight.
func (s *soak) execute() {
	slots := make(chan struct{}, s.cfg.parallel)
	var wg sync.WaitGroup
	for _, c := range s.cells {
		for range c.schedules {
			slots <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				for range c.schedules {
					<-slots
				}
			}()
			s.runCell(c)
		}()
	}
	wg.Wait()
}

// report is the outcome of a run, printed by summary.
type report struct {
	monitor.Result
	// duration is the wall time of the schedules (execute); total that of the spec up to the
	// summary, the managers' start and the monitor's check included.
	duration, total time.Duration
	lags            float64
	stuck           []*schedule
	byKind          map[string]int
}

func (s *soak) summary(r report) string {
	var b strings.Builder
	rate := float64(len(s.schedules)) / r.duration.Seconds()
	fmt.Fprintf(&b, "soak: seed %d, %d schedules (%d clusters, %d machines, %d pools) in %d cells of up to %d, %d in flight; %s (%.2f schedules/s)\n",
		s.cfg.seed, len(s.schedules), r.byKind[infrav1.TerraformClusterKind], r.byKind[infrav1.TerraformMachineKind], r.byKind[infrav1.TerraformMachinePoolKind],
		len(s.cells), s.cfg.cell, s.cfg.parallel, r.duration.Round(time.Second), rate)
	var ops []string
	for op, n := range r.ByOp {
		ops = append(ops, fmt.Sprintf("%s %d", op, n))
	}
	sort.Strings(ops)
	fmt.Fprintf(&b, "soak: Jobs %d (%s), failed %d\n", r.Jobs, strings.Join(ops, ", "), r.Failed)
	var faults []string
	total := int64(0)
	for _, f := range faultTypes {
		n := s.faults[f].Load()
		total += n
		faults = append(faults, fmt.Sprintf("  %-72s %d", f, n))
	}
	fmt.Fprintf(&b, "soak: faults injected %d:\n%s\n", total, strings.Join(faults, "\n"))
	for _, m := range s.managers {
		fmt.Fprintf(&b, "soak: manager %s restarted %d times, declined %d crashes (down or just started)\n", managerName(m.idx), m.restarts, m.declined)
	}
	modes := map[infrav1.DriftMode]int{}
	var drifts, found, remediations int32
	for _, sc := range s.schedules {
		if sc.plan.drift != "" {
			modes[sc.plan.drift]++
		}
		d := sc.drifts.Load()
		drifts, found, remediations = drifts+d, found+(d+1)/2, remediations+sc.remediations.Load()
	}
	fmt.Fprintf(&b, "soak: drift checks on in %d schedules (Report %d, Remediate %d): %d drift Jobs played, %d found drift, %d remediation applies in the drift step, "+
		"%d applies of new inputs during Report steps (changed contract inputs, not remediations)\n",
		modes[infrav1.DriftModeReport]+modes[infrav1.DriftModeRemediate], modes[infrav1.DriftModeReport], modes[infrav1.DriftModeRemediate], drifts, found, remediations,
		s.reportNewInputs.Load())
	fmt.Fprintf(&b, "soak: Jobs created against a state lost or replaced after the controller read it %d (the monitor), refused by the state channel %d (the executor)\n",
		r.Refused, s.refusedRuns.Load())
	fmt.Fprintf(&b, "soak: lags detected %.0f (passes that waited for the cache)\n", r.lags)
	fmt.Fprintf(&b, "soak: violations %d, schedules that did not converge %d\n", len(r.Violations), len(r.stuck))
	var took []time.Duration
	for _, sc := range s.schedules {
		if !sc.ended.IsZero() {
			took = append(took, sc.ended.Sub(sc.began))
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	pct := func(p float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[int(p*float64(len(took)-1))].Round(100 * time.Millisecond)
	}
	var steps []string
	for step := stepCreate; step < stepDone; step++ {
		var d []time.Duration
		for _, sc := range s.schedules {
			d = append(d, sc.took[step])
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		steps = append(steps, fmt.Sprintf("%s %s/%s", stepNames[step], d[len(d)/2].Round(100*time.Millisecond), d[len(d)-1].Round(100*time.Millisecond)))
	}
	fmt.Fprintf(&b, "soak: step times, median/longest: %s\n", strings.Join(steps, ", "))
	fmt.Fprintf(&b, "soak: wall time %s (schedules), %s (the spec, with the managers' start and the monitor's check); %.1f schedules per minute; "+
		"one schedule took %s (median), %s (90th percentile), %s (longest)\n",
		r.duration.Round(100*time.Millisecond), r.total.Round(100*time.Millisecond), float64(len(s.schedules))/r.duration.Minutes(), pct(0.5), pct(0.9), pct(1))
	return b.String()
}

// failures explains each violation and each schedule that did not converge, with its seed,
// its plan and the commands that replay it.
func (s *soak) failures(r report) string {
	var b strings.Builder
	explain := func(sc *schedule, what string) {
		fmt.Fprintf(&b, "soak FAILED: schedule %d, seed %d (%s %s/%s): %s\n  plan: %s\n  replay: %s\n  with its cell: %s\n",
			sc.idx, sc.seed, sc.plan.kind, sc.ns, sc.name, what, sc.plan, sc.replay(), sc.replayCell())
	}
	for _, v := range r.Violations {
		s.mu.RLock()
		sc := s.byObject[v.Owner]
		s.mu.RUnlock()
		if sc == nil {
			for _, c := range s.cells {
				if c.ns == v.Namespace && len(c.schedules) > 0 {
					sc = c.schedules[0]
				}
			}
		}
		if sc == nil {
			fmt.Fprintf(&b, "soak FAILED: %s\n", v)
			continue
		}
		explain(sc, v.String())
	}
	for _, sc := range r.stuck {
		explain(sc, sc.err.Error())
	}
	return b.String()
}

var _ = Describe("Soak: seeded schedules of the three kinds under stale caches, failing writes, conflicts, crashes and a second manager", Label("soak"), func() {
	It("never breaks I1-I5 or I7, and every schedule converges", func() {
		cfg, err := soakConfigFromEnv()
		Expect(err).NotTo(HaveOccurred())
		specBegan := time.Now()
		s := newSoak(cfg)
		fmt.Printf("soak: seed %d, %d schedules, %d in flight, cells of %d\n", cfg.seed, cfg.schedules, cfg.parallel, cfg.cell)
		mon := startMonitorFor(func(ns string) bool { return strings.HasPrefix(ns, s.prefix+"-") })
		vctx, stopView := context.WithCancel(ctx)
		DeferCleanup(stopView)
		Expect(s.startView(vctx)).To(Succeed())

		lagBefore := cachelag.Detected()
		for i := range s.managers {
			s.managers[i] = newRole(s, i)
			Expect(s.managers[i].start()).To(Succeed())
		}
		DeferCleanup(func() {
			for _, m := range s.managers {
				_ = m.stop()
			}
		})
		execCtx, stopExec := context.WithCancel(ctx)
		exec := startExecutor(execCtx, s.jobRun, func(err error) {
			s.execMu.Lock()
			defer s.execMu.Unlock()
			s.execErrs = append(s.execErrs, err)
		})
		DeferCleanup(func() {
			stopExec()
			exec.wait()
		})

		nudgeCtx, stopNudge := context.WithCancel(ctx)
		nudged := make(chan struct{})
		go func() {
			defer close(nudged)
			s.nudgeLagged(nudgeCtx)
		}()
		DeferCleanup(func() {
			stopNudge()
			<-nudged
		})

		began := time.Now()
		s.execute()
		duration := time.Since(began)
		stopNudge()
		<-nudged

		stopExec()
		exec.wait()
		for _, m := range s.managers {
			Expect(m.stop()).To(Succeed())
		}
		namespaces := map[string]bool{}
		for _, c := range s.cells {
			namespaces[c.ns] = true
		}
		r := report{Result: mon.replayAll(namespaces), duration: duration, lags: cachelag.Detected() - lagBefore, byKind: map[string]int{}}
		r.total = time.Since(specBegan)
		for _, sc := range s.schedules {
			r.byKind[sc.plan.kind]++
			if sc.err != nil {
				r.stuck = append(r.stuck, sc)
			}
		}
		fmt.Print(s.summary(r))
		if len(r.Violations) > 0 || len(r.stuck) > 0 {
			fmt.Print(s.failures(r))
		}
		Expect(errors.Join(s.execErrs...)).NotTo(HaveOccurred(), "the executor could not play every Job")
		Expect(r.Violations).To(BeEmpty(), "invariants broken; see the replay commands above")
		Expect(r.stuck).To(BeEmpty(), "schedules that did not converge (L1); see the replay commands above")
		Expect(r.Jobs).To(BeNumerically(">=", 5*len(s.schedules)), "every schedule applies, applies again, destroys, applies and destroys")
		if cfg.slice {
			// The slice's seed must plan every fault type; which planned write faults are
			// carried out depends on which manager makes the write, so only their sum is
			// required to be injected.
			planned := map[string]bool{}
			for _, sc := range s.schedules {
				for f := range sc.plan.planned() {
					planned[f] = true
				}
			}
			var injected int64
			for _, f := range faultTypes {
				injected += s.faults[f].Load()
				if f == faultJobFailed {
					continue // the slice keeps every Job successful (planOptions.noJobFailures)
				}
				Expect(planned).To(HaveKey(f), "the slice's seed must plan every fault type: %s", f)
			}
			Expect(injected).To(BeNumerically(">", 0), "the slice injected no fault")
			for _, f := range []string{faultJobHidden, faultObjectOld, faultStateLost} {
				Expect(s.faults[f].Load()).To(BeNumerically(">", 0), "the slice must inject %s", f)
			}
			// Drift checks in both modes, so the monitor's I1 and I7 see drift Jobs next to
			// applies (remediations and input changes), a state loss and destroys.
			modes := map[infrav1.DriftMode]bool{}
			var remediations int32
			for _, sc := range s.schedules {
				modes[sc.plan.drift] = true
				remediations += sc.remediations.Load()
			}
			Expect(modes).To(HaveKey(infrav1.DriftModeReport), "the slice's seed must plan drift checks in mode Report")
			Expect(modes).To(HaveKey(infrav1.DriftModeRemediate), "the slice's seed must plan drift checks in mode Remediate")
			Expect(r.ByOp[infrav1.OperationDrift]).To(BeNumerically(">=", 2), "the monitor must see the slice's drift Jobs")
			Expect(remediations).To(BeNumerically(">", 0), "drift found under Remediate must have applied")
		}
	})
})
