package sim_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformcluster"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sim/admission"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/faults"
	"github.com/captf/cluster-api-provider-terraform/test/sim/informer"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
	"github.com/captf/cluster-api-provider-terraform/test/sim/runner"
)

// convergeBound is how long after a schedule's last step or fault (faults.Schedule.Settle) its
// object must have converged: Ready and idle, or gone when the schedule deletes it.
const convergeBound = 30 * time.Minute

// quiet is how long a converged object is watched before the schedule ends.
const quiet = time.Minute

// outcome of one schedule.
type schedOutcome struct {
	seed       uint64
	violations []string
	// unconverged says why the object did not converge ("" when it did).
	unconverged string
	trace       []string
	jobs        int
	restarts    int
	faults      int
	// denials counts the managers' writes CAPTF's webhooks refused: the engine tried what
	// the guard exists to stop (not a violation: the webhook is part of the design).
	denials int
	bubble  time.Duration
}

func (o schedOutcome) failed() bool { return len(o.violations) > 0 || o.unconverged != "" }

type incKey struct{}

// incarnation is one life of one manager: its cache (cold at start), its reconciler, and what
// the driver knows of its work queue.
type incarnation struct {
	m, n     int
	name     string
	cache    *informer.Cache
	r        *engine.Reconciler
	recorder *events.FakeRecorder
	// dead: the manager crashed after a write; every later request of it fails.
	dead bool
	// pending is the fault to play after the current write (lost, crash).
	pending string
	// dirty: its cache applied an event since its last pass; due: its next requeue (zero: none).
	dirty  bool
	due    time.Duration
	errs   int
	passes int
}

// schedRun is one schedule inside its bubble.
type schedRun struct {
	t         *testing.T
	s         faults.Schedule
	tr        *tracer
	start     time.Time
	scheme    *runtime.Scheme
	store     *apiserver.Store
	api       client.WithWatch
	selectors map[schema.GroupKind]labels.Selector
	stops     []func()
	wake      chan struct{}

	mu       sync.Mutex
	inc      [2]*incarnation
	lives    [2]int
	restarts int
	faultsN  int
	denials  int
	writes   [2]map[string]int
	requests [2]int
	nested   bool
	history  []recorded
	// changedAt is the resourceVersion of the last input change a person made (0: none): the
	// object converges only once an apply created after it has completed.
	changedAt uint64
}

// recorded is one version of an object from the store's watches (the write stream).
type recorded struct {
	rv      uint64
	obj     client.Object
	deleted bool
}

func (w *schedRun) now() time.Duration { return time.Since(w.start) }

// runSchedule plays the schedule of seed in a bubble and checks it.
func runSchedule(t *testing.T, seed uint64, withoutGuard bool) schedOutcome {
	t.Helper()
	var out schedOutcome
	synctest.Test(t, func(t *testing.T) {
		w := newSchedRun(t, faults.Draw(seed), withoutGuard)
		defer w.stop()
		d := w.drive()
		synctest.Wait()
		out = w.judge(d)
	})
	return out
}

func newSchedRun(t *testing.T, s faults.Schedule, withoutGuard bool) *schedRun {
	w := &schedRun{t: t, s: s, tr: &tracer{start: time.Now()}, start: time.Now(), wake: make(chan struct{}, 1)}
	w.writes = [2]map[string]int{{}, {}}
	var err error
	if w.scheme, err = setup.NewScheme(); err != nil {
		t.Fatal(err)
	}
	chain := admission.New(w.scheme, admission.Options{WithoutGuard: withoutGuard})
	w.store, err = apiserver.New(w.scheme, apiserver.Options{
		Seed: s.Seed, Mutate: chain.Mutate, Validate: chain.Validate, Deliver: informer.Deliver(nil),
		Intercept: w.intercept, AfterWrite: w.afterWrite,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.api = w.store.Client()
	chain.Bind(w.api)
	w.selectors = map[schema.GroupKind]labels.Selector{}
	for obj, by := range setup.CacheOptions(setup.Options{}).ByObject {
		gvk, err := apiutil.GVKForObject(obj, w.scheme)
		if err != nil {
			t.Fatal(err)
		}
		w.selectors[gvk.GroupKind()] = by.Label
	}
	w.follow(&batchv1.JobList{}, &infrav1.TerraformClusterList{}, &corev1.SecretList{})
	rm := runner.New(runner.Options{Seed: s.Seed, CrashPercent: s.Crash, KillPercent: s.KillRun, OverrunPercent: s.Overrun,
		State:   admission.As(w.api, admission.Manager(admission.DefaultManager)),
		Observe: func(e runner.Ended) { w.tr.add("%s", e) }})
	jc := kcm.StartJobController(admission.As(w.api, admission.Manager(kcm.JobControllerUser)), kcm.JobOptions{
		Seed: s.Seed, Latency: 250 * time.Millisecond, Decide: rm.Decide, End: rm.End,
		Observe: func(x kcm.Transition) { w.tr.add("job controller %s %s/%s", x.What, x.Namespace, x.Name) }})
	w.stops = append(w.stops, jc.Stop)
	w.createObjects()
	return w
}

// createObjects applies what a person applies: the namespace, the Cluster and the
// TerraformCluster.
func (w *schedRun) createObjects() {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}},
		objects.Cluster(ns, "c1").Spec(func(s *infrav1.TerraformSpec) {
			s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
			s.Variables = &runtime.RawExtension{Raw: []byte(`{"size":1}`)}
			s.Job.ActiveDeadlineSeconds = ptr.To(int64(120))
		}).Obj(),
	} {
		if err := w.api.Create(w.t.Context(), o); err != nil {
			w.t.Fatalf("create %T: %v", o, err)
		}
	}
}

// follow records every version of the listed kinds from the store's own watches (not a
// manager's cache): the history the invariants are checked on.
func (w *schedRun) follow(lists ...client.ObjectList) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range lists {
		wi, err := w.api.Watch(ctx, l)
		if err != nil {
			w.t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range wi.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				w.mu.Lock()
				w.history = append(w.history, recorded{rv: parseRV(obj.GetResourceVersion()), obj: obj, deleted: ev.Type == watch.Deleted})
				w.mu.Unlock()
			}
		}()
	}
	w.stops = append(w.stops, func() { cancel(); wg.Wait() })
}

func parseRV(s string) uint64 {
	var n uint64
	_, _ = fmt.Sscan(s, &n)
	return n
}

func (w *schedRun) stop() {
	for m := range w.inc {
		w.down(m)
	}
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// up starts a fresh incarnation of manager m: a cold cache and a new reconciler.
func (w *schedRun) up(m int) {
	w.mu.Lock()
	w.lives[m]++
	n := w.lives[m]
	w.mu.Unlock()
	name := fmt.Sprintf("%s%d", faults.Name(m), n)
	writer := admission.As(w.api, admission.Manager(admission.DefaultManager))
	inc := &incarnation{m: m, n: n, name: name, recorder: events.NewFakeRecorder(1000), dirty: true}
	inc.cache = informer.New(w.api, informer.Options{Name: name, Seed: w.s.Seed, MaxLag: w.s.Lag[m], Selectors: w.selectors,
		Observe: func(a informer.Applied) {
			w.tr.add("%s cache %s %s %s rv=%d", name, a.Kind, a.Type, a.Name, a.ResourceVersion)
			w.mu.Lock()
			inc.dirty = true
			w.mu.Unlock()
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}})
	inc.r = &engine.Reconciler{
		Client: informer.Client(inc.cache, writer), APIReader: w.api, Kind: terraformcluster.Kind{},
		Leases:   runlease.New(writer, w.api, runlease.DefaultOptions()),
		Recorder: inc.recorder, Clock: clock.RealClock{},
		Jobs: jobs.Defaults{RunnerImage: "captf/manager:sim", ServiceAccountName: "captf-runner"},
	}
	w.mu.Lock()
	w.inc[m] = inc
	w.mu.Unlock()
	w.tr.add("%s up", name)
}

// down stops manager m's current incarnation (its goroutines end; its cache is dropped).
func (w *schedRun) down(m int) {
	w.mu.Lock()
	inc := w.inc[m]
	w.inc[m] = nil
	w.mu.Unlock()
	if inc == nil {
		return
	}
	inc.cache.Stop()
	w.tr.add("%s down", inc.name)
}

// pass runs one reconcile of the object by inc, as its work queue would.
func (w *schedRun) pass(inc *incarnation) {
	w.mu.Lock()
	inc.dirty = false
	inc.passes++
	w.mu.Unlock()
	ctx := context.WithValue(w.t.Context(), incKey{}, inc)
	res, err := inc.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "c1"}})
	w.tr.add("%s pass %d: requeue after %v, error %v", inc.name, inc.passes, res.RequeueAfter, err)
	drainEvents(w.tr, inc)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		// controller-runtime's per-item rate limiter: 5 ms doubling, capped (here at a minute).
		inc.errs++
		inc.due = w.now() + min(5*time.Millisecond<<min(inc.errs, 20), time.Minute)
	case res.RequeueAfter > 0:
		inc.errs, inc.due = 0, w.now()+res.RequeueAfter
	default:
		inc.errs, inc.due = 0, 0
	}
}

func drainEvents(tr *tracer, inc *incarnation) {
	for {
		select {
		case e := <-inc.recorder.Events:
			tr.add("%s event %s", inc.name, strings.Join(strings.Fields(e)[:2], " "))
		default:
			return
		}
	}
}

// intercept is the store's Options.Intercept: a crashed manager's requests fail, preemptions
// run the other manager's pass, and planned write faults are injected.
func (w *schedRun) intercept(ctx context.Context, r apiserver.Request) error {
	inc, _ := ctx.Value(incKey{}).(*incarnation)
	if inc == nil {
		return nil
	}
	w.mu.Lock()
	if inc.dead {
		w.mu.Unlock()
		return apierrors.NewServiceUnavailable("the manager is gone")
	}
	w.requests[inc.m]++
	preempt := !w.nested && w.s.PreemptAt(inc.m, w.requests[inc.m]) && w.inc[1-inc.m] != nil
	if preempt {
		w.nested = true
	}
	w.mu.Unlock()
	if preempt {
		w.tr.add("%s preempted before %s %s", inc.name, r.Verb, r.Kind.Kind)
		w.pass(w.inc[1-inc.m])
		w.mu.Lock()
		w.nested = false
		w.mu.Unlock()
	}
	return w.writeFault(inc, r)
}

func (w *schedRun) writeFault(inc *incarnation, r apiserver.Request) error {
	point := pointOf(r)
	if point == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[inc.m][point]++
	f, ok := w.s.FaultAt(point, inc.m, w.writes[inc.m][point])
	if !ok {
		return nil
	}
	w.faultsN++
	w.tr.add("fault %s (%s %s%s %s)", f, r.Verb, r.Kind.Kind, subresource(r), r.Name)
	gr := schema.GroupResource{Group: r.Kind.Group, Resource: strings.ToLower(r.Kind.Kind) + "s"}
	switch f.Mode {
	case faults.ModeFail:
		return apierrors.NewInternalError(fmt.Errorf("injected: %s", f))
	case faults.ModeConflict:
		return apierrors.NewConflict(gr, r.Name, fmt.Errorf("injected: %s", f))
	default:
		inc.pending = f.Mode
		return nil
	}
}

// afterWrite traces every write and plays lost responses and crashes.
func (w *schedRun) afterWrite(ctx context.Context, r apiserver.Request, err error) error {
	w.tr.add("%s %s%s %s/%s %s rv=%d", r.Verb, r.Kind.Kind, subresource(r), r.Namespace, r.Name, outcome(err), w.store.ResourceVersion())
	inc, _ := ctx.Value(incKey{}).(*incarnation)
	if inc == nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "admission webhook") {
		w.denials++
	}
	mode := inc.pending
	inc.pending = ""
	if err != nil || mode == "" {
		return err
	}
	gr := schema.GroupResource{Group: r.Kind.Group, Resource: strings.ToLower(r.Kind.Kind) + "s"}
	if mode == faults.ModeCrash {
		inc.dead = true
	}
	return apierrors.NewServerTimeout(gr, string(r.Verb), 1)
}

// pointOf names a write by what it writes, as the chaos soak does (soak_faults_test.go's
// pointOf reads the object; a request carries only its kind and name).
func pointOf(r apiserver.Request) string {
	switch r.Verb {
	case apiserver.VerbCreate, apiserver.VerbUpdate, apiserver.VerbPatch, apiserver.VerbDelete:
	default:
		return ""
	}
	del := r.Verb == apiserver.VerbDelete
	switch r.Kind.Kind {
	case "Lease":
		switch {
		case !strings.HasPrefix(r.Name, "captf-"):
			return ""
		case del:
			return faults.PointRelease
		}
		return faults.PointLease
	case "Job":
		if r.Verb == apiserver.VerbCreate {
			return faults.PointJob
		}
	case "Secret":
		switch {
		case del:
			return faults.PointCleanup
		case strings.HasPrefix(r.Name, "captf-inputs-"):
			return faults.PointInputs
		case strings.HasSuffix(r.Name, "-run"):
			return faults.PointRunSecret
		}
		return faults.PointSecret
	case infrav1.TerraformClusterKind:
		if r.Subresource == "status" {
			return faults.PointStatus
		}
		if r.Verb == apiserver.VerbPatch {
			return faults.PointMeta
		}
	}
	return ""
}
