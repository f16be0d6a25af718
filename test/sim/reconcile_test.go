package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformcluster"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sim/admission"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/informer"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
)

const ns = "team-a"

// tracer records, in order, what a run does: every write the store serves (verb, kind, object,
// outcome, the resourceVersion after it), every event the manager's cache applies, every
// status the Job controller writes and every reconcile pass, each with the bubble's time since
// the start.
type tracer struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (tr *tracer) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf("%9v ", time.Since(tr.start))+fmt.Sprintf(format, args...))
}

func (tr *tracer) all() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.lines)
}

// outcome names an error by its reason, as callers test it.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return string(st.Status().Reason)
	}
	return "error"
}

// world is one simulated cluster inside a synctest bubble: the store with CAPTF's webhooks, the
// Job controller model, a TerraformCluster with its Cluster, and the trace.
type world struct {
	t         *testing.T
	seed      uint64
	tr        *tracer
	scheme    *runtime.Scheme
	store     *apiserver.Store
	api       client.WithWatch
	selectors map[schema.GroupKind]labels.Selector
	stops     []func()

	mu sync.Mutex
	// overlaps lists every Job create after which the namespace held more than one
	// unfinished Job (CAPTF's first invariant: one Job at a time per object).
	overlaps []string
}

// newWorld builds the world of one seed; call stop (deferred) before the bubble ends.
func newWorld(t *testing.T, seed uint64) *world {
	t.Helper()
	w := &world{t: t, seed: seed, tr: &tracer{start: time.Now()}}
	var err error
	if w.scheme, err = setup.NewScheme(); err != nil {
		t.Fatal(err)
	}
	chain := admission.New(w.scheme, admission.Options{})
	w.store, err = apiserver.New(w.scheme, apiserver.Options{
		Seed: seed, Mutate: chain.Mutate, Validate: chain.Validate, Deliver: informer.Deliver(nil),
		AfterWrite: func(ctx context.Context, r apiserver.Request, err error) error {
			w.tr.add("%s %s%s %s/%s %s rv=%d", r.Verb, r.Kind.Kind, subresource(r), r.Namespace, r.Name, outcome(err), w.store.ResourceVersion())
			if err == nil && r.Verb == apiserver.VerbCreate && r.Kind.Kind == "Job" {
				w.checkOneJob(ctx, r.Name)
			}
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.api = w.store.Client()
	chain.Bind(w.api)
	// The manager's cache scoping (Jobs and Secrets labelled captf.io/managed=true).
	w.selectors = map[schema.GroupKind]labels.Selector{}
	for obj, by := range setup.CacheOptions(setup.Options{}).ByObject {
		gvk, err := apiutil.GVKForObject(obj, w.scheme)
		if err != nil {
			t.Fatal(err)
		}
		w.selectors[gvk.GroupKind()] = by.Label
	}
	jc := kcm.StartJobController(admission.As(w.api, admission.Manager(kcm.JobControllerUser)), kcm.JobOptions{Seed: seed, Latency: 250 * time.Millisecond,
		Observe: func(x kcm.Transition) { w.tr.add("job controller %s %s/%s", x.What, x.Namespace, x.Name) }})
	w.stops = append(w.stops, jc.Stop)

	user := w.api // a person applying manifests
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}},
		objects.Cluster(ns, "c1").Spec(func(s *infrav1.TerraformSpec) {
			s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
			s.Variables = &runtime.RawExtension{Raw: []byte(`{"size":1}`)}
		}).Obj(),
	} {
		if err := user.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	return w
}

// stop ends the world's goroutines.
func (w *world) stop() {
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// checkOneJob records an overlap when, right after the Job named created was created, the
// namespace (one object's) holds more than one unfinished Job.
func (w *world) checkOneJob(ctx context.Context, created string) {
	l := &batchv1.JobList{}
	if err := w.api.List(ctx, l, client.InNamespace(ns)); err != nil {
		w.t.Errorf("list Jobs: %v", err)
		return
	}
	var live []string
	for i := range l.Items {
		if !jobstatus.Finished(&l.Items[i]) {
			live = append(live, l.Items[i].Name)
		}
	}
	if len(live) > 1 {
		w.mu.Lock()
		w.overlaps = append(w.overlaps, fmt.Sprintf("after creating %s: unfinished Jobs %v", created, live))
		w.mu.Unlock()
	}
}

// manager is one manager's TerraformCluster reconciler, with its own lagging cache (seeded by
// the world's seed and its name) and its own lease manager; every manager writes as the same
// ServiceAccount, as two replicas of one Deployment do.
type manager struct {
	name     string
	r        *engine.Reconciler
	recorder *events.FakeRecorder
}

func (w *world) manager(name string) *manager {
	writer := admission.As(w.api, admission.Manager(admission.DefaultManager))
	cache := informer.New(w.api, informer.Options{Name: name, Seed: w.seed, MaxLag: 2 * time.Second, Selectors: w.selectors,
		Observe: func(a informer.Applied) {
			w.tr.add("%s cache %s %s %s/%s rv=%d", name, a.Kind, a.Type, a.Namespace, a.Name, a.ResourceVersion)
		}})
	w.stops = append(w.stops, cache.Stop)
	m := &manager{name: name, recorder: events.NewFakeRecorder(1000)}
	m.r = &engine.Reconciler{
		Client: informer.Client(cache, writer), APIReader: w.api, Kind: terraformcluster.Kind{},
		Leases:   runlease.New(writer, w.api, runlease.DefaultOptions()),
		Recorder: m.recorder, Clock: clock.RealClock{},
		Jobs: jobs.Defaults{RunnerImage: "captf/manager:sim", ServiceAccountName: "captf-runner"},
	}
	return m
}

// pass runs one reconcile of the TerraformCluster and traces it and its events.
func (w *world) pass(m *manager, n int) ctrl.Result {
	res, err := m.r.Reconcile(w.t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "c1"}})
	w.tr.add("%s pass %d: requeue after %v, error %v", m.name, n, res.RequeueAfter, err)
	for {
		select {
		case e := <-m.recorder.Events:
			w.tr.add("%s event %s", m.name, strings.Join(strings.Fields(e)[:2], " "))
		default:
			return res
		}
	}
}

// startedApply is the apply Job the Job controller has started, if any.
func (w *world) startedApply() *batchv1.Job {
	l := &batchv1.JobList{}
	if err := w.api.List(w.t.Context(), l, client.InNamespace(ns), client.MatchingLabels{infrav1.OperationLabel: string(infrav1.OperationApply)}); err != nil {
		w.t.Fatal(err)
	}
	for i := range l.Items {
		if l.Items[i].Status.StartTime != nil {
			return l.Items[i].DeepCopy()
		}
	}
	return nil
}

// firstApply runs CAPTF's TerraformCluster reconciler in a synctest bubble against the
// simulated API server (with CAPTF's webhooks), a lagging informer cache scoped as the
// manager's, and the Job controller model, until the first apply Job has been started; it
// returns the run's trace and that Job.
func firstApply(t *testing.T, seed uint64) ([]string, *batchv1.Job) {
	t.Helper()
	var trace []string
	var applyJob *batchv1.Job
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, seed)
		defer w.stop()
		m := w.manager("manager")
		for pass := 1; applyJob == nil; pass++ {
			if pass > 30 {
				t.Fatalf("no apply Job started after 30 passes:\n%s", strings.Join(w.tr.all(), "\n"))
			}
			synctest.Wait()
			res := w.pass(m, pass)
			wait := res.RequeueAfter
			if wait <= 0 || wait > 10*time.Second {
				wait = time.Second
			}
			time.Sleep(wait)
			synctest.Wait()
			applyJob = w.startedApply()
		}
		trace = w.tr.all()
	})
	return trace, applyJob
}

func subresource(r apiserver.Request) string {
	if r.Subresource == "" {
		return ""
	}
	return "/" + r.Subresource
}

// TestReconcilerReachesFirstApply runs the real TerraformCluster reconciler inside the
// simulation until its first apply Job is started, and requires the marks the start sequence
// sets (block-move, activeJob, the run and cluster leases) around that Job.
func TestReconcilerReachesFirstApply(t *testing.T) {
	trace, job := firstApply(t, 1)
	if job == nil {
		t.Fatal("no apply Job")
	}
	if !slices.ContainsFunc(trace, func(l string) bool { return strings.Contains(l, "create Job "+ns+"/"+job.Name+" ok") }) {
		t.Errorf("the trace does not show the Job's create:\n%s", strings.Join(trace, "\n"))
	}
	if !slices.ContainsFunc(trace, func(l string) bool { return strings.Contains(l, "job controller started "+ns+"/"+job.Name) }) {
		t.Errorf("the Job controller did not start the Job:\n%s", strings.Join(trace, "\n"))
	}
	if job.Labels[infrav1.ManagedLabel] != "true" {
		t.Errorf("the apply Job's labels %v lack %s", job.Labels, infrav1.ManagedLabel)
	}
	if testing.Verbose() {
		t.Logf("trace of seed 1:\n%s", strings.Join(trace, "\n"))
	}
}

// TestSeedDeterminesReconcile runs the reconciler twice with one seed and requires the same
// trace, write for write and instant for instant; another seed lags the cache differently.
func TestSeedDeterminesReconcile(t *testing.T) {
	a, _ := firstApply(t, 7)
	b, _ := firstApply(t, 7)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("seed 7 gave two runs; first difference at line %d:\n%s\n%s", i, a[i], b[i])
			}
		}
		t.Fatalf("seed 7 gave runs of %d and %d lines", len(a), len(b))
	}
	if c, _ := firstApply(t, 8); slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same trace")
	}
}

// TestTwoManagersOneJobAtATime runs two managers without leader election (two caches lagging
// differently, passes half a second apart, every second) for five minutes of the bubble's
// time per seed, while the Job controller runs their Jobs, and requires that no Job is ever
// created while another of the object is unfinished, and that an apply Job was created.
func TestTwoManagersOneJobAtATime(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		trace, overlaps := twoManagers(t, seed, 300)
		creates := 0
		for _, l := range trace {
			if strings.Contains(l, " create Job ") && strings.Contains(l, " ok ") {
				creates++
			}
		}
		if testing.Verbose() {
			t.Logf("seed %d: %d Jobs created; trace:\n%s", seed, creates, strings.Join(trace, "\n"))
		}
		if creates == 0 {
			t.Errorf("seed %d: no Job was created:\n%s", seed, strings.Join(trace, "\n"))
		}
		if len(overlaps) > 0 {
			t.Errorf("seed %d: two Jobs of one object at once: %v\n%s", seed, overlaps, strings.Join(trace, "\n"))
		}
	}
}

// TestTwoManagersSeedDeterminesRun runs the two managers twice with one seed and requires the
// same trace.
func TestTwoManagersSeedDeterminesRun(t *testing.T) {
	a, _ := twoManagers(t, 3, 120)
	b, _ := twoManagers(t, 3, 120)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("seed 3 gave two runs; first difference at line %d:\n%s\n%s", i, a[i], b[i])
			}
		}
		t.Fatalf("seed 3 gave runs of %d and %d lines", len(a), len(b))
	}
}

// twoManagers runs managers a and b, passes half a second apart, every second, for the given
// number of rounds, and returns the trace and the overlaps seen.
func twoManagers(t *testing.T, seed uint64, rounds int) ([]string, []string) {
	t.Helper()
	var trace, overlaps []string
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, seed)
		defer w.stop()
		a, b := w.manager("a"), w.manager("b")
		for pass := 1; pass <= rounds; pass++ {
			synctest.Wait()
			w.pass(a, pass)
			time.Sleep(500 * time.Millisecond)
			synctest.Wait()
			w.pass(b, pass)
			time.Sleep(500 * time.Millisecond)
		}
		synctest.Wait()
		trace = w.tr.all()
		w.mu.Lock()
		overlaps = slices.Clone(w.overlaps)
		w.mu.Unlock()
	})
	return trace, overlaps
}

// TestOverlapCheck proves the check TestTwoManagersOneJobAtATime relies on: a second Job
// created beside an unfinished one is recorded.
func TestOverlapCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 1)
		defer w.stop()
		for _, name := range []string{"x", "y"} {
			j := objects.Job(ns, name).Obj()
			j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
			if err := w.api.Create(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.overlaps) != 1 {
			t.Errorf("overlaps %v, want the create of y", w.overlaps)
		}
	})
}
