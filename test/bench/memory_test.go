package bench

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

const (
	foreignJobs      = 2000
	foreignAnnotSize = 100 * 1024
)

// heapDelta starts a manager (scoped: Jobs cached only with captf.io/managed=true; unscoped:
// every Job), waits until its Job informer has listed, and returns how much the live heap grew
// (the median of three rounds).
func heapDelta(b *testing.B, scoped bool) uint64 {
	b.Helper()
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
	for round := 0; round < 3; round++ {
		before := settle()
		mgr, stop := startManager(b, nil, func(o *manager.Options) {
			if !scoped {
				o.Cache.ByObject = nil
			}
		})
		// The Job informer starts with the controllers, after the manager's own sync: wait
		// until it has listed, so the measurement includes every Job it caches.
		inf, err := mgr.GetCache().GetInformer(ctx, &batchv1.Job{})
		if err != nil {
			b.Fatal(err)
		}
		waitFor(b, "job informer sync", inf.HasSynced)
		after := settle()
		runtime.KeepAlive(mgr)
		stop()
		if after.HeapAlloc > before.HeapAlloc {
			samples = append(samples, after.HeapAlloc-before.HeapAlloc)
		} else {
			samples = append(samples, 0)
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return samples[1]
}

func createForeignJobs(b *testing.B, ns string) {
	b.Helper()
	big := strings.Repeat("x", foreignAnnotSize)
	var wg sync.WaitGroup
	errs := make(chan error, foreignJobs)
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				j := &batchv1.Job{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("foreign-%04d", i),
						Annotations: map[string]string{"example.com/payload": big}},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
					}}},
				}
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
		b.Fatal(err)
	}
}

// BenchmarkManagerHeapWithForeignJobs compares the manager's heap with 0 and with 2,000
// foreign Jobs (not CAPTF's, 100 KB annotation each), with the product's label-scoped Job
// cache and with an unscoped one, side by side in one run.
func BenchmarkManagerHeapWithForeignJobs(b *testing.B) {
	start(b)
	for i := 0; i < b.N; i++ {
		scoped0, unscoped0 := heapDelta(b, true), heapDelta(b, false)
		createForeignJobs(b, namespace(b, "foreign"))
		scoped1, unscoped1 := heapDelta(b, true), heapDelta(b, false)
		mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
		growth := func(a, z uint64) float64 { return 100 * (float64(z) - float64(a)) / float64(a) }
		fmt.Printf("\n%-10s %14s %22s %10s\n", "cache", "0 foreign Jobs", "2000 foreign Jobs", "growth")
		fmt.Printf("%-10s %11.1f MB %19.1f MB %9.1f%%\n", "scoped", mb(scoped0), mb(scoped1), growth(scoped0, scoped1))
		fmt.Printf("%-10s %11.1f MB %19.1f MB %9.1f%%\n", "unscoped", mb(unscoped0), mb(unscoped1), growth(unscoped0, unscoped1))
		fmt.Printf("unscoped / scoped heap with 2000 foreign Jobs: %.1fx\n", float64(unscoped1)/float64(scoped1))
		b.ReportMetric(growth(scoped0, scoped1), "scoped-growth-%")
		b.ReportMetric(mb(scoped1), "scoped-MB")
		b.ReportMetric(mb(unscoped1), "unscoped-MB")
		break
	}
}
