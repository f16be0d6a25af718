package chaos_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/cachelag"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

// lockedRand is a math/rand source safe for the managers' concurrent workers.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// raceRun plays every Job for a random moment (100 to 400 ms), then ends it successfully with
// the state terraform would leave.
func raceRun(rnd *lockedRand) func(*batchv1.Job) (run, bool) {
	return func(j *batchv1.Job) (run, bool) {
		_, suffix := jobOwner(j)
		st := appliedState(j)
		return run{delay: time.Duration(100+rnd.Float64()*300) * time.Millisecond, succeeded: true,
			writeState: func() error { return statetest.Write(ctx, k8s, j.Namespace, suffix, st) }}, true
	}
}

var _ = Describe("Two managers without leader election, under random cache lag", func() {
	It("never breaks I1-I5 through create, input change and delete of clusters, machines and pools", func() {
		mon := startMonitor()
		rnd := &lockedRand{r: rand.New(rand.NewSource(GinkgoRandomSeed()))}
		lagBefore := cachelag.Detected()
		// The watch latency: half the events reach the handlers 50 to 250 ms late (and the ones
		// behind them wait, as on one watch stream); until an event is delivered, the double may
		// serve the version before it, never after.
		latency := func() time.Duration {
			if rnd.Float64() >= 0.5 {
				return 0
			}
			return time.Duration(50+rnd.Float64()*200) * time.Millisecond
		}
		delayEvents := func(r *running) { r.stale.DelayEvents(latency) }
		a := startManager(managerOpts{withStale: true, staleEvents: true, built: delayEvents})
		b := startManager(managerOpts{withStale: true, staleEvents: true, built: delayEvents})
		for _, m := range []*running{a, b} {
			Eventually(func() *stalecache.Reader { return m.stale }).ShouldNot(BeNil())
			// Jobs go missing from the cache (created, not yet seen); objects come back one
			// version old (an informer one event behind). Objects are never hidden outright: a
			// real informer raises an object's event only once it holds the object, so hiding
			// the object a pass was triggered for would test a cache that cannot exist. For the
			// same reason the double is wired to the cache's events (staleEvents): it never
			// serves an object older than one it served or whose event it delivered.
			m.stale.Add(stalecache.Random(&batchv1.Job{}, 0.3, rnd.Float64))
			m.stale.Add(stalecache.Lagging(&infrav1.TerraformCluster{}, 0.2, rnd.Float64))
			m.stale.Add(stalecache.Lagging(&infrav1.TerraformMachine{}, 0.2, rnd.Float64))
			m.stale.Add(stalecache.Lagging(&infrav1.TerraformMachinePool{}, 0.2, rnd.Float64))
		}
		execCtx, stopExec := context.WithCancel(ctx)
		var execErrs []error
		var execMu sync.Mutex
		exec := startExecutor(execCtx, raceRun(rnd), func(err error) {
			execMu.Lock()
			defer execMu.Unlock()
			execErrs = append(execErrs, err)
		})
		// A failing spec must not leave its executor finishing the next spec's Jobs.
		DeferCleanup(func() {
			stopExec()
			exec.wait()
		})

		var objs []client.Object
		for i := 0; i < 4; i++ {
			ns := kit.Namespace()
			objs = append(objs, createCluster(ns, "c1", false))
			for j := 0; j < 3; j++ {
				objs = append(objs, createMachine(ns, "c1", fmt.Sprintf("m%d", j)))
			}
			objs = append(objs, createPool(ns, "c1", "p0"))
		}
		provisioned := func(g Gomega) {
			for _, o := range objs {
				fresh := o.DeepCopyObject().(client.Object)
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh)).To(Succeed())
				g.Expect(fresh.(interface {
					GetTerraformStatus() *infrav1.TerraformStatus
				}).GetTerraformStatus().IsProvisioned()).To(BeTrue(), "%s/%s not provisioned: %s", o.GetNamespace(), o.GetName(), describe(fresh))
			}
		}
		// Generous bounds: this spec is about safety, not speed. When the double hides the read
		// a watch event triggered, convergence waits for the next 30 s requeue (lease and
		// dependency waits), and CI shares two cores with other suites. Typical runs end every
		// phase in well under a minute.
		By("create: all 20 provisioned (4 clusters, 12 machines, 4 pools)")
		Eventually(provisioned, "300s").Should(Succeed())

		By("input change: every object applies its new inputs")
		applied := map[string]string{}
		for _, o := range objs {
			applied[o.GetNamespace()+"/"+o.GetName()+"/"+fmt.Sprintf("%T", o)] = get(o).GetAnnotations()["captf.io/applied-hash"]
		}
		for _, o := range objs {
			Eventually(func() error {
				fresh := o.DeepCopyObject().(client.Object)
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
					return err
				}
				spec := fresh.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec()
				spec.Variables = &runtime.RawExtension{Raw: []byte(`{"changed":true}`)}
				return k8s.Update(ctx, fresh)
			}).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, o := range objs {
				fresh := o.DeepCopyObject().(client.Object)
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh)).To(Succeed())
				key := o.GetNamespace() + "/" + o.GetName() + "/" + fmt.Sprintf("%T", o)
				g.Expect(fresh.GetAnnotations()["captf.io/applied-hash"]).NotTo(Equal(applied[key]), "%s not re-applied: %s", key, describe(fresh))
			}
		}, "300s").Should(Succeed())

		By("delete: every object destroyed and gone")
		for _, o := range objs {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, o := range objs {
				fresh := o.DeepCopyObject().(client.Object)
				err := k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh)
				g.Expect(client.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "%s/%s still exists: %s", o.GetNamespace(), o.GetName(), describe(fresh))
			}
		}, "300s").Should(Succeed())

		stopExec()
		exec.wait()
		Expect(execErrs).To(BeEmpty(), "the executor could not play every Job")
		Expect(a.Stop()).To(Succeed())
		Expect(b.Stop()).To(Succeed())
		namespaces := map[string]bool{}
		for _, o := range objs {
			namespaces[o.GetNamespace()] = true
		}
		violations, jobs := mon.check(namespaces)
		hidden := a.stale.Hidden() + b.stale.Hidden()
		aged := a.stale.Aged() + b.stale.Aged()
		fmt.Printf("race: objects %d, jobs %d, Job reads hidden %d, stale object reads %d, lags detected %.0f, violations %d\n",
			len(objs), jobs, hidden, aged, cachelag.Detected()-lagBefore, len(violations))
		Expect(violations).To(BeEmpty())
		Expect(jobs).To(BeNumerically(">=", 3*len(objs)), "each object applies twice and destroys once")
		Expect(hidden).To(BeNumerically(">", 0), "the double must have hidden Jobs")
		Expect(aged).To(BeNumerically(">", 0), "the double must have served stale objects")
	})
})

// describe says what an object reports, for failure messages.
func describe(o client.Object) string {
	st := o.(interface {
		GetTerraformStatus() *infrav1.TerraformStatus
	}).GetTerraformStatus()
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	var jobs []string
	for _, j := range jobsIn(o.GetNamespace()) {
		jobs = append(jobs, fmt.Sprintf("%s(%s, terminal=%v)", j.Name, j.Labels[infrav1.OperationLabel], terminal(&j)))
	}
	return fmt.Sprintf("annotations %v, finalizers %v, activeJob %+v, conditions %v, jobs in namespace %v",
		o.GetAnnotations(), o.GetFinalizers(), st.ActiveJob, conds, jobs)
}
