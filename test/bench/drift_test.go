package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// jobWatch follows the managed Jobs of a set of namespaces through one watch (every event,
// not samples), so the most Jobs running at once is what the API server held, not what a poll
// happened to see. A Job runs from its creation until it is finished (jobstatus.Finished), the
// same rule the manager's Job slots count by.
type jobWatch struct {
	mu      sync.Mutex
	started time.Time
	// created holds, per Job, when its creation was seen (relative to started) and its
	// operation.
	created map[types.NamespacedName]jobSeen
	running map[types.NamespacedName]bool
	// maxRunning and maxBackground are the most Jobs (and background Jobs) seen running at
	// once.
	maxRunning, maxBackground int
	stop                      func()
	done                      chan struct{}
}

type jobSeen struct {
	after time.Duration
	op    infrav1.Operation
}

// watchJobs starts following the managed Jobs of namespaces; stop it with stop.
func watchJobs(tb testing.TB, namespaces []string) *jobWatch {
	tb.Helper()
	ours := map[string]bool{}
	for _, ns := range namespaces {
		ours[ns] = true
	}
	wc, err := client.NewWithWatch(rest.CopyConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	// From the present on: a watch without a resourceVersion would first replay every Job
	// that exists (the fixture's finished apply Jobs) as created.
	existing := &batchv1.JobList{}
	if err := k8s.List(ctx, existing, client.MatchingLabels{infrav1.ManagedLabel: "true"}, client.Limit(1)); err != nil {
		tb.Fatalf("list jobs: %v", err)
	}
	w, err := wc.Watch(ctx, &batchv1.JobList{}, client.MatchingLabels{infrav1.ManagedLabel: "true"},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: existing.ResourceVersion}})
	if err != nil {
		tb.Fatalf("watch jobs: %v", err)
	}
	jw := &jobWatch{started: time.Now(), created: map[types.NamespacedName]jobSeen{}, running: map[types.NamespacedName]bool{},
		stop: w.Stop, done: make(chan struct{})}
	go func() {
		defer close(jw.done)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || !ours[j.Namespace] {
				continue
			}
			jw.observe(ev.Type, j)
		}
	}()
	return jw
}

func (jw *jobWatch) observe(t watch.EventType, j *batchv1.Job) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	k := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
	op := infrav1.Operation(j.Labels[infrav1.OperationLabel])
	if _, seen := jw.created[k]; !seen && t != watch.Deleted {
		jw.created[k] = jobSeen{after: time.Since(jw.started), op: op}
	}
	if t == watch.Deleted || jobstatus.Finished(j) {
		delete(jw.running, k)
	} else {
		jw.running[k] = true
	}
	total, background := 0, 0
	for r := range jw.running {
		total++
		if jw.created[r].op.Background() {
			background++
		}
	}
	jw.maxRunning = max(jw.maxRunning, total)
	jw.maxBackground = max(jw.maxBackground, background)
}

// restart makes the watch's clock start now (the manager's start).
func (jw *jobWatch) restart() {
	jw.mu.Lock()
	jw.started = time.Now()
	jw.mu.Unlock()
}

// counts reports how many Jobs were created (of op; "" any) within the first window after
// started (0: ever), how many run now and the most seen running at once.
func (jw *jobWatch) counts(op infrav1.Operation, window time.Duration) (created, running, maxRunning, maxBackground int) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	for _, s := range jw.created {
		if (op == "" || s.op == op) && (window == 0 || s.after <= window) {
			created++
		}
	}
	return created, len(jw.running), jw.maxRunning, jw.maxBackground
}

// byOp counts the Jobs created within the first window after started, by operation.
func (jw *jobWatch) byOp(window time.Duration) map[string]int {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	out := map[string]int{}
	for _, s := range jw.created {
		if s.after <= window {
			out[string(s.op)]++
		}
	}
	return out
}

func (jw *jobWatch) close() {
	jw.stop()
	<-jw.done
}

// waitUntil polls cond (every 250 ms) until it holds or timeout passes; then it fails with
// what cond last said.
func waitUntil(tb testing.TB, timeout time.Duration, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fleetObjects lists the fleet's TerraformClusters, TerraformMachines and TerraformMachinePools.
func (f *fleet) fleetObjects(tb testing.TB) []engine.Object {
	tb.Helper()
	var out []engine.Object
	for _, ns := range f.namespaces {
		tcs, tms, tps := &infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}
		for _, l := range []client.ObjectList{tcs, tms, tps} {
			if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
				tb.Fatal(err)
			}
		}
		for i := range tcs.Items {
			out = append(out, &tcs.Items[i])
		}
		for i := range tms.Items {
			out = append(out, &tms.Items[i])
		}
		for i := range tps.Items {
			out = append(out, &tps.Items[i])
		}
	}
	return out
}

// patchAll merge-patches every object with patch, in parallel.
func patchAll(tb testing.TB, objs []engine.Object, patch func(engine.Object) string) {
	tb.Helper()
	if err := inParallel(objs, func(o engine.Object) error {
		if err := k8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(patch(o)))); err != nil {
			return fmt.Errorf("patch %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
}

const (
	// driftGateObjects is the fleet TestDriftRestartSpreadGate restarts on, every object with
	// a drift check long overdue.
	driftGateObjects = 100
	// driftGateWindow is the observation window after the manager's start, and
	// driftGateMaxShare the share of the fleet's drift Jobs it may hold (issue 14: at most 10%
	// of the checks in the first 6 seconds of a 1-minute interval).
	driftGateWindow   = 6 * time.Second
	driftGateMaxShare = 0.10
)

// TestDriftRestartSpreadGate is the gate in `make test` for the drift schedule after a
// restart: 100 applied objects (clusters, machines and pools) with spec.drift.interval 1m
// whose last check (captf.io/last-drift-check) is ten minutes old, so every check is overdue
// when the manager starts. With no Job cap in the way (--max-active-jobs 1000,
// --max-background-jobs 0), the manager starts at most 10 drift Jobs in the first 6 seconds:
// the overdue checks are spread by each object's phase (decide.DriftDueAt), not started at
// once. The manager must have looked at every object within the window, or the window proves
// nothing. Counts within a fixed window, never a time of the code.
func TestDriftRestartSpreadGate(t *testing.T) {
	start(t)
	f := &fleet{prefix: "driftgate"}
	defer f.remove(t)
	f.grow(t, driftGateObjects)
	settle(t, f.objects())

	last := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	objs := f.fleetObjects(t)
	patchAll(t, objs, func(engine.Object) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"drift":{"interval":"1m","mode":"Report"}}}`,
			infrav1.LastDriftCheckAnnotation, last)
	})

	jw := watchJobs(t, f.namespaces)
	defer jw.close()
	before := controllerMetrics()
	jw.restart()
	_, stop := startManagerOpts(t, nil, setup.Options{MaxActiveJobs: 1000, MaxBackgroundJobs: 0})
	defer stop()
	// The observation window is the thing measured: wait it out.
	<-time.After(driftGateWindow - time.Since(jw.started))
	drift, _, _, _ := jw.counts(infrav1.OperationDrift, driftGateWindow)
	all, _, _, _ := jw.counts("", driftGateWindow)
	passes := controllerMetrics()[metricPasses] - before[metricPasses]
	fmt.Printf("\ndrift restart: %d objects overdue, %.0f passes and %d drift Jobs (%d Jobs in all) in the first %s: %s\n",
		len(objs), passes, drift, all, driftGateWindow, format(jw.byOp(driftGateWindow)))
	if limit := int(driftGateMaxShare * float64(len(objs))); drift > limit {
		t.Errorf("%d of %d overdue drift checks started in the first %s after a restart, want at most %d: the overdue checks are not spread",
			drift, len(objs), driftGateWindow, limit)
	}
	if passes < float64(len(objs)) {
		// Too few starts mean nothing when the manager has not looked at every object.
		t.Errorf("the manager reconciled %.0f times in the first %s, fewer than the %d objects: the window proves nothing", passes, driftGateWindow, len(objs))
	}
	if all != drift {
		t.Errorf("%d Jobs other than drift checks started in the first %s: the fixture is not an applied, idle fleet", all-drift, driftGateWindow)
	}
}

const (
	// slotGateCells is the fleet TestJobSlotsBurstGate uses (23 cells: 207 machines and pools),
	// slotGateBurst how many of its members get new inputs at once, and slotGateMax and
	// slotGateMaxBackground the manager's caps.
	slotGateCells         = 23
	slotGateBurst         = 200
	slotGateMax           = 20
	slotGateMaxBackground = 10
	// slotGateFinish is how many running Jobs the gate ends to free their slots.
	slotGateFinish = 5
)

// slotBurst is what one burst against the manager's Job slots showed.
type slotBurst struct {
	// created and maxRunning are the Jobs created and the most seen running at once before
	// any ended; waiting the objects that reported WaitingForJobSlot then.
	created, maxRunning, waiting int
	// createdAfter, runningAfter and maxRunningAfter are the same once slotGateFinish Jobs
	// ended.
	createdAfter, runningAfter, maxRunningAfter int
}

// runSlotBurst gives slotGateBurst applied machines and pools new inputs at once while a
// manager with --max-active-jobs slotGateMax (--max-background-jobs slotGateMaxBackground)
// runs and nothing ends the Jobs (the bench's node runs their pods until told), waits until
// slotGateMax Jobs were created and every other object reports WaitingForJobSlot (or the cap
// was exceeded), ends slotGateFinish of the running Jobs (their pods fail, the Job controller
// fails the Jobs: their objects back off and start nothing more) and waits until as many more
// were created.
func runSlotBurst(tb testing.TB) slotBurst {
	tb.Helper()
	f := &fleet{prefix: "slotgate"}
	defer f.remove(tb)
	f.grow(tb, slotGateCells*fleetPerCell)
	settle(tb, f.objects())

	var members []engine.Object
	for _, o := range f.fleetObjects(tb) {
		if _, cluster := o.(*infrav1.TerraformCluster); !cluster && len(members) < slotGateBurst {
			members = append(members, o)
		}
	}
	if len(members) != slotGateBurst {
		tb.Fatalf("the fleet has %d members, want %d", len(members), slotGateBurst)
	}

	jw := watchJobs(tb, f.namespaces)
	defer jw.close()
	_, stop := startManagerOpts(tb, nil, setup.Options{MaxActiveJobs: slotGateMax, MaxBackgroundJobs: slotGateMaxBackground})
	defer stop()
	patchAll(tb, members, func(o engine.Object) string {
		if _, pool := o.(*infrav1.TerraformMachinePool); pool {
			return `{"spec":{"variables":{"instances":3}}}`
		}
		return `{"spec":{"variables":{"flavor":"large"}}}`
	})

	waiting := func() int {
		n := 0
		for _, o := range f.fleetObjects(tb) {
			c := meta.FindStatusCondition(o.GetTerraformStatus().Conditions, infrav1.ApplyJobSucceededCondition)
			if c != nil && c.Reason == infrav1.WaitingForJobSlotReason {
				n++
			}
		}
		return n
	}
	var res slotBurst
	waitUntil(tb, 45*time.Second, func() (bool, string) {
		created, running, maxRunning, _ := jw.counts("", 0)
		res.created, res.maxRunning = created, maxRunning
		if created >= slotGateMax {
			res.waiting = waiting() // 69 lists: only once the cap is reached
		}
		// A cap exceeded ends the wait at once: the caller judges it.
		return created >= slotGateMax && res.waiting == slotGateBurst-slotGateMax || maxRunning > slotGateMax,
			fmt.Sprintf("%d Jobs created, %d running (at most %d at once), %d objects wait for a slot; want %d created and %d waiting",
				created, running, maxRunning, res.waiting, slotGateMax, slotGateBurst-slotGateMax)
	})
	if res.maxRunning > slotGateMax {
		return res
	}

	jobList := &batchv1.JobList{}
	var ended int
	for _, ns := range f.namespaces {
		if err := k8s.List(ctx, jobList, client.InNamespace(ns), client.MatchingLabels{infrav1.ManagedLabel: "true"}); err != nil {
			tb.Fatal(err)
		}
		for i := range jobList.Items {
			j := &jobList.Items[i]
			if ended < slotGateFinish && !jobstatus.Finished(j) && j.Labels[infrav1.OperationLabel] == string(infrav1.OperationApply) {
				// Its pod fails on the bench's node; the Job controller fails the Job.
				if err := node.end(j.Namespace, j.Name, false, ""); err != nil {
					tb.Fatal(err)
				}
				ended++
			}
		}
	}
	if ended != slotGateFinish {
		tb.Fatalf("ended %d running apply Jobs, want %d", ended, slotGateFinish)
	}
	want := slotGateMax + slotGateFinish
	waitUntil(tb, 45*time.Second, func() (bool, string) {
		created, running, maxRunning, _ := jw.counts("", 0)
		return created >= want && running >= slotGateMax || maxRunning > slotGateMax,
			fmt.Sprintf("%d Jobs created, %d running (at most %d at once) after %d ended; want %d created and %d running",
				created, running, maxRunning, slotGateFinish, want, slotGateMax)
	})
	res.createdAfter, res.runningAfter, res.maxRunningAfter, _ = jw.counts("", 0)
	return res
}

func printSlotBurst(r slotBurst) {
	fmt.Printf("\n%-6s %-9s %-8s %-12s %-8s %-7s %-14s %-14s %-14s\n", "burst", "cap (bg)", "created", "max running", "waiting",
		"ended", "created after", "running after", "max run after")
	fmt.Printf("%-6d %-9s %-8d %-12d %-8d %-7d %-14d %-14d %-14d\n", slotGateBurst, fmt.Sprintf("%d (%d)", slotGateMax, slotGateMaxBackground),
		r.created, r.maxRunning, r.waiting, slotGateFinish, r.createdAfter, r.runningAfter, r.maxRunningAfter)
}

// TestJobSlotsBurstGate is the gate in `make test` for the manager's Job slots (runSlotBurst):
// 200 applied machines and pools get new inputs at once under --max-active-jobs 20. A watch of
// the Jobs sees never more than 20 running at once; the cap is used (20 start); the other 180
// report ApplyJobSucceeded Unknown with the reason WaitingForJobSlot; and when 5 Jobs end,
// exactly 5 more start (25 created, 20 running, never more). Counts only.
func TestJobSlotsBurstGate(t *testing.T) {
	start(t)
	r := runSlotBurst(t)
	printSlotBurst(r)
	if r.maxRunning > slotGateMax || r.maxRunningAfter > slotGateMax {
		t.Fatalf("%d Jobs ran at once (%d after %d ended), want at most --max-active-jobs %d", r.maxRunning, r.maxRunningAfter, slotGateFinish, slotGateMax)
	}
	if r.created != slotGateMax || r.waiting != slotGateBurst-slotGateMax {
		t.Errorf("the burst created %d Jobs and %d objects wait for a slot; want %d and %d", r.created, r.waiting, slotGateMax, slotGateBurst-slotGateMax)
	}
	if want := slotGateMax + slotGateFinish; r.createdAfter != want || r.runningAfter != slotGateMax {
		t.Errorf("after %d Jobs ended: %d created, %d running; want %d and %d", slotGateFinish, r.createdAfter, r.runningAfter, want, slotGateMax)
	}
}

// BenchmarkJobSlotsBurst prints runSlotBurst as a table for `make bench`: the burst, the cap,
// the Jobs created and the most running at once, the objects waiting for a slot, and the same
// after some Jobs ended.
func BenchmarkJobSlotsBurst(b *testing.B) {
	start(b)
	r := runSlotBurst(b)
	printSlotBurst(r)
	b.ReportMetric(float64(max(r.maxRunning, r.maxRunningAfter)), "max-running")
	b.ReportMetric(float64(slotGateMax), "cap")
}
