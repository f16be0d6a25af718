package bench

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

const (
	foreignJobs      = 2000
	foreignAnnotSize = 100 * 1024
)

// maxScopedHeapRatio is the gate: the manager's heap with foreignJobs foreign Jobs is at most
// this multiple of its heap with none (label-scoped Job cache, median of three rounds each).
const maxScopedHeapRatio = 1.10

// heapDelta starts a manager (scoped: Jobs cached only with captf.io/managed=true; unscoped:
// every Job), waits until its caches have listed and its heap has settled, and returns how much
// the live heap grew (the median of three rounds, after one unmeasured warm-up round) and the
// three samples.
func heapDelta(tb testing.TB, scoped bool) (uint64, []uint64) {
	tb.Helper()
	settle := func() runtime.MemStats {
		var m runtime.MemStats
		for i := 0; i < 3; i++ {
			runtime.GC()
		}
		debug.FreeOSMemory()
		runtime.ReadMemStats(&m)
		return m
	}
	var samples []uint64
	// One unmeasured round first: the first manager of the process allocates global state
	// (scheme, REST mapper, metrics) that every later one reuses and that would otherwise count
	// against whichever measurement runs first.
	for round := -1; round < 3; round++ {
		before := settle()
		mgr, stop := startManager(tb, nil, func(o *manager.Options) {
			if !scoped {
				o.Cache.ByObject = nil
			}
		})
		// The Job informer starts with the controllers, after the manager's own sync: wait
		// until it has listed, so the measurement includes every Job it caches.
		inf, err := mgr.GetCache().GetInformer(ctx, &batchv1.Job{})
		if err != nil {
			tb.Fatal(err)
		}
		waitFor(tb, "job informer sync", inf.HasSynced)
		// Wait for every informer the controllers registered meanwhile, so none is stopped
		// halfway through its first list (which would also log an error at stop).
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			tb.Fatal("caches did not sync")
		}
		after := steadyHeap(tb, settle)
		runtime.KeepAlive(mgr)
		stop()
		if round < 0 {
			continue
		}
		if after.HeapAlloc > before.HeapAlloc {
			samples = append(samples, after.HeapAlloc-before.HeapAlloc)
		} else {
			samples = append(samples, 0)
		}
	}
	sorted := append([]uint64(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[1], samples
}

// steadyHeap reads the heap (after GC) every 100 ms until three readings in a row agree within
// heapSteadyBytes, and returns the last. Right after its caches synced, a manager is still
// starting its controllers: a single reading then lands up to 0.3 MB above or below where the
// heap settles, which is noise as large as what the gate measures.
func steadyHeap(tb testing.TB, settle func() runtime.MemStats) runtime.MemStats {
	tb.Helper()
	const heapSteadyBytes = 4 << 10
	last, agreeing := settle(), 0
	for tries := 0; tries < 100; tries++ {
		time.Sleep(100 * time.Millisecond)
		now := settle()
		diff := int64(now.HeapAlloc) - int64(last.HeapAlloc)
		if diff < 0 {
			diff = -diff
		}
		if last = now; diff <= heapSteadyBytes {
			if agreeing++; agreeing == 2 {
				return now
			}
			continue
		}
		agreeing = 0
	}
	tb.Fatalf("the manager's heap did not settle within 10 s (last reading %d bytes)", last.HeapAlloc)
	return last
}

// foreignNamespace is the namespace of the foreign Jobs, created once for the package.
var foreignNamespace string

// ensureForeignJobs creates foreignJobs Jobs that are not CAPTF's (no captf.io/managed label,
// a 100 KB annotation each) in their own namespace, once for the package. They are suspended
// (held by whoever owns them), so the real Job controller creates no pods for them; it still
// takes every one in hand (the Suspended condition), and ensureForeignJobs waits for that, so
// the heap is measured with the foreign Jobs as they stay, not while they change.
func ensureForeignJobs(tb testing.TB) {
	tb.Helper()
	if foreignNamespace != "" {
		return
	}
	ns := namespace(tb, "foreign")
	suspended := watchSuspended(tb, ns)
	big := strings.Repeat("x", foreignAnnotSize)
	var wg sync.WaitGroup
	errs := make(chan error, foreignJobs)
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				j := objects.Job(ns, fmt.Sprintf("foreign-%04d", i)).Annotation("example.com/payload", big).Suspend().Obj()
				if err := k8s.Create(ctx, j); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < foreignJobs; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	if err := suspended(); err != nil {
		tb.Fatal(err)
	}
	foreignNamespace = ns
}

// foreignJobsTimeout bounds how long the Job controller may take to mark every foreign Job
// suspended.
const foreignJobsTimeout = 5 * time.Minute

// watchSuspended starts following the Jobs of ns (empty yet) and returns a function that waits
// until foreignJobs of them carry the Suspended condition the Job controller sets. A watch
// (in protobuf), not polls: each list of the foreign Jobs would carry their 200 MB again.
func watchSuspended(tb testing.TB, ns string) func() error {
	tb.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	empty := &batchv1.JobList{}
	if err := k8s.List(ctx, empty, client.InNamespace(ns)); err != nil {
		tb.Fatalf("list jobs: %v", err)
	}
	// Read from the start. A watcher that falls behind (each event carries a Job's 100 KB) is
	// closed by the API server: the watch is then resumed from the last version it delivered,
	// as a reflector would.
	watchFrom := func(rv string) (watch.Interface, error) {
		return wc.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	}
	w, err := watchFrom(empty.ResourceVersion)
	if err != nil {
		tb.Fatalf("watch jobs: %v", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	current := w
	stopped := false
	all := make(chan struct{})
	ended := make(chan struct{})
	var endErr error
	go func() {
		defer close(ended)
		last := empty.ResourceVersion
		for resumes := 0; ; resumes++ {
			for ev := range current.ResultChan() {
				if ev.Type == watch.Error {
					endErr = fmt.Errorf("watch error: %v", ev.Object)
					return
				}
				if o, ok := ev.Object.(client.Object); ok && o.GetResourceVersion() != "" {
					last = o.GetResourceVersion()
				}
				j, isJob := ev.Object.(*batchv1.Job)
				if !isJob || !jobSuspended(j) {
					continue
				}
				mu.Lock()
				seen[j.Name] = true
				if len(seen) == foreignJobs {
					close(all)
				}
				mu.Unlock()
			}
			mu.Lock()
			done := stopped || len(seen) == foreignJobs
			mu.Unlock()
			if done {
				return
			}
			if resumes == maxWatchResumes {
				endErr = fmt.Errorf("the watch ended %d times", resumes+1)
				return
			}
			next, err := watchFrom(last)
			if err != nil {
				endErr = fmt.Errorf("resume the watch from %s: %w", last, err)
				return
			}
			mu.Lock()
			current = next
			if stopped {
				next.Stop()
			}
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	return func() error {
		defer func() {
			mu.Lock()
			stopped = true
			current.Stop()
			mu.Unlock()
			<-ended
		}()
		select {
		case <-all:
			return nil
		case <-ended:
			return fmt.Errorf("the watch of the foreign Jobs ended with %d of %d suspended: %w", count(), foreignJobs, endErr)
		case <-time.After(foreignJobsTimeout):
			return fmt.Errorf("after %s the Job controller has marked %d of %d foreign Jobs suspended", foreignJobsTimeout, count(), foreignJobs)
		}
	}
}

// maxWatchResumes bounds how often the watch of the foreign Jobs is resumed.
const maxWatchResumes = 20

// jobSuspended reports whether the Job carries the Suspended condition, True.
func jobSuspended(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func mb(v uint64) float64 { return float64(v) / (1 << 20) }

func samplesMB(s []uint64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%.2f", mb(v))
	}
	return strings.Join(parts, ", ")
}

// BenchmarkManagerHeapWithForeignJobs compares the manager's heap with 0 and with 2,000
// foreign Jobs (not CAPTF's, 100 KB annotation each), with the product's label-scoped Job
// cache and with an unscoped one, side by side in one run.
func BenchmarkManagerHeapWithForeignJobs(b *testing.B) {
	start(b)
	if foreignNamespace != "" {
		b.Fatal("the foreign Jobs exist already: run this benchmark alone (make bench runs no tests)")
	}
	scoped0, _ := heapDelta(b, true)
	unscoped0, _ := heapDelta(b, false)
	ensureForeignJobs(b)
	scoped1, _ := heapDelta(b, true)
	unscoped1, _ := heapDelta(b, false)
	growth := func(a, z uint64) float64 { return 100 * (float64(z) - float64(a)) / float64(a) }
	fmt.Printf("\n%-10s %14s %22s %10s\n", "cache", "0 foreign Jobs", "2000 foreign Jobs", "growth")
	fmt.Printf("%-10s %11.1f MB %19.1f MB %9.1f%%\n", "scoped", mb(scoped0), mb(scoped1), growth(scoped0, scoped1))
	fmt.Printf("%-10s %11.1f MB %19.1f MB %9.1f%%\n", "unscoped", mb(unscoped0), mb(unscoped1), growth(unscoped0, unscoped1))
	fmt.Printf("unscoped / scoped heap with 2000 foreign Jobs: %.1fx\n", float64(unscoped1)/float64(scoped1))
	b.ReportMetric(growth(scoped0, scoped1), "scoped-growth-%")
	b.ReportMetric(mb(scoped1), "scoped-MB")
	b.ReportMetric(mb(unscoped1), "unscoped-MB")
}

// TestManagerHeapWithForeignJobsGate is the gate in `make test`: the product's manager, whose
// Job cache is scoped to CAPTF's label, holds no more heap with 2,000 foreign Jobs in the
// cluster than with none (at most maxScopedHeapRatio, median of three rounds each). It
// compares heap sizes only, never times.
func TestManagerHeapWithForeignJobsGate(t *testing.T) {
	start(t)
	if foreignNamespace != "" {
		t.Fatal("the foreign Jobs exist already; this test measures the heap without them first")
	}
	none, noneSamples := heapDelta(t, true)
	ensureForeignJobs(t)
	with, withSamples := heapDelta(t, true)
	if none == 0 {
		t.Fatalf("the manager's heap did not grow at all without foreign Jobs (samples %s MB); the measurement is broken", samplesMB(noneSamples))
	}
	ratio := float64(with) / float64(none)
	fmt.Printf("\nmanager heap, label-scoped Job cache: %.2f MB with 0 foreign Jobs (samples %s), %.2f MB with %d (samples %s): %.3fx (gate %.2fx)\n",
		mb(none), samplesMB(noneSamples), mb(with), foreignJobs, samplesMB(withSamples), ratio, maxScopedHeapRatio)
	if ratio > maxScopedHeapRatio {
		t.Errorf("the manager's heap with %d foreign Jobs is %.3fx its heap with none (%.2f MB vs %.2f MB), over the %.2fx gate: is the Job cache still scoped to %s?",
			foreignJobs, ratio, mb(with), mb(none), maxScopedHeapRatio, infrav1.ManagedLabel+"=true")
	}
}
