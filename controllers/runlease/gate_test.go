package runlease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// hookedManager is a Manager over its own client whose lease writes (creates and updates) call
// a per-round hook before and after they reach the API server, so a race round can start the
// other side at an exact point of this side's sequence.
type hookedManager struct {
	*runlease.Manager
	mu     sync.Mutex
	writes int
	hook   func(write int, after bool)
}

func newHookedManager(clk *clocktesting.FakeClock, gate bool) *hookedManager {
	h := &hookedManager{}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	around := func(write func() error) error {
		h.mu.Lock()
		h.writes++
		n, hook := h.writes, h.hook
		h.mu.Unlock()
		if hook != nil {
			hook(n, false)
		}
		err := write()
		if hook != nil {
			hook(n, true)
		}
		return err
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return around(func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return around(func() error { return c.Update(ctx, obj, opts...) })
		},
	})
	h.Manager = runlease.New(c, base, options(clk, gate))
	return h
}

// releaseAt returns a hook that closes ch at the given write (1 = run lease, 2 = cluster lease)
// before or after it reaches the API server, and the channel.
func (h *hookedManager) releaseAt(write int, after bool) chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	h.mu.Lock()
	h.writes = 0
	h.hook = func(n int, a bool) {
		if n == write && a == after {
			once.Do(func() { close(ch) })
		}
	}
	h.mu.Unlock()
	return ch
}

// Writes is the number of lease writes since the last noHook or releaseAt.
func (h *hookedManager) Writes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes
}

func (h *hookedManager) setHook(hook func(write int, after bool)) {
	h.mu.Lock()
	h.writes, h.hook = 0, hook
	h.mu.Unlock()
}

func (h *hookedManager) noHook() {
	h.mu.Lock()
	h.writes, h.hook = 0, nil
	h.mu.Unlock()
}

// raceModes are the interleavings a round forces, in turn.
var raceModes = []string{
	"all start together",
	"members start right after the cluster's run lease write",
	"members start right before the cluster's cluster lease write",
	"members start right after the cluster's cluster lease write",
	"the cluster starts right after the machine's run lease write",
	"the cluster runs entirely between the machine's look and its write",
}

// raceRound races a cluster apply against a machine apply and a pool apply, each through its
// own client, in the interleaving of mode, and returns their results.
func raceRound(cm, mm, pm *hookedManager, cluster, machine, pool runlease.Owner, seq int64, mode int) (c, m, p runlease.Result) {
	open := make(chan struct{})
	close(open)
	clusterStart, memberStart := open, open
	clusterDone := make(chan struct{})
	poolStart := (<-chan struct{})(nil)
	cm.noHook()
	mm.noHook()
	switch mode {
	case 1:
		memberStart = cm.releaseAt(1, true)
	case 2:
		memberStart = cm.releaseAt(2, false)
	case 3:
		memberStart = cm.releaseAt(2, true)
	case 4:
		clusterStart = mm.releaseAt(1, true)
	case 5:
		// The machine has looked at the cluster lease (free) and is about to write its hold;
		// the cluster takes its leases, scans and decides before that write lands.
		clusterStart = make(chan struct{})
		poolStart = clusterDone
		var once sync.Once
		mm.setHook(func(n int, after bool) {
			if n == 1 && !after {
				once.Do(func() { close(clusterStart) })
				<-clusterDone
			}
		})
	}
	var wg sync.WaitGroup
	run := func(mgr *hookedManager, o runlease.Owner, start <-chan struct{}, out *runlease.Result, done chan struct{}) {
		wg.Go(func() {
			defer GinkgoRecover()
			if done != nil {
				defer close(done)
			}
			<-start
			res, err := mgr.Acquire(ctx, request(o, seq, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			*out = res
		})
	}
	run(cm, cluster, clusterStart, &c, clusterDone)
	run(mm, machine, memberStart, &m, nil)
	if poolStart == nil {
		poolStart = memberStart
	}
	run(pm, pool, poolStart, &p, nil)
	wg.Wait()
	return c, m, p
}

var _ = Describe("The operation gate", func() {
	It("never lets a cluster apply and a machine or pool apply both proceed, in 100 rounds; with the gate off both may", func() {
		const rounds = 100
		ns := newNamespace()
		clk := fakeClock()
		cluster, machine, pool := clusterOwner(ns), machineOwner(ns, "m1"), poolOwner(ns, "p1")
		cm, mm, pm := newHookedManager(clk, true), newHookedManager(clk, true), newHookedManager(clk, true)
		var clusterOnly, membersOnly, allWaited int
		perMode := make([][3]int, len(raceModes))
		for round := range rounds {
			deleteAllLeases(ns)
			mode := round % len(raceModes)
			c, m, p := raceRound(cm, mm, pm, cluster, machine, pool, int64(round), mode)
			Expect(c.Acquired && (m.Acquired || p.Acquired)).To(BeFalse(),
				"round %d: the cluster and a member both proceeded (cluster %+v, machine %+v, pool %+v)", round, c.Wait, m.Wait, p.Wait)
			for _, r := range []struct {
				res runlease.Result
				o   runlease.Owner
			}{{m, machine}, {p, pool}} {
				if r.res.Wait != nil && r.res.Wait.Reason == infrav1.WaitingForClusterOperationReason {
					Expect(getLease(ns, r.o.RunLeaseName())).To(BeNil(), "a member that saw the cluster gives its run lease back")
				}
			}
			switch {
			case c.Acquired:
				clusterOnly++
				perMode[mode][0]++
				Expect(m.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
			case m.Acquired || p.Acquired:
				membersOnly++
				perMode[mode][1]++
				Expect(c.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
			default:
				allWaited++
				perMode[mode][2]++
			}
		}
		fmt.Printf("gate on: %d rounds of cluster apply vs machine apply vs pool apply: cluster alone %d, members only %d, all waited %d, both proceeded 0\n",
			rounds, clusterOnly, membersOnly, allWaited)
		for i, name := range raceModes {
			fmt.Printf("  %-70s cluster alone %2d, members only %2d, all waited %2d\n", name+":", perMode[i][0], perMode[i][1], perMode[i][2])
		}
		Expect(clusterOnly).To(BeNumerically(">", 0), "the race never let the cluster through: it proves nothing")
		Expect(membersOnly).To(BeNumerically(">", 0), "the race never let a member through: it proves nothing")

		off := newNamespace()
		cluster, machine, pool = clusterOwner(off), machineOwner(off, "m1"), poolOwner(off, "p1")
		cm, mm, pm = newHookedManager(clk, false), newHookedManager(clk, false), newHookedManager(clk, false)
		both := 0
		const offRounds = 20
		for round := range offRounds {
			deleteAllLeases(off)
			c, m, _ := raceRound(cm, mm, pm, cluster, machine, pool, int64(round), 0)
			if c.Acquired && m.Acquired {
				both++
			}
		}
		Expect(getLease(off, cluster.ClusterLeaseName())).To(BeNil(), "with the gate off no cluster lease is taken")
		fmt.Printf("gate off: %d rounds, cluster and machine both proceeded in %d\n", offRounds, both)
		Expect(both).To(BeNumerically(">=", 1))
	})

	It("prefers the writer: a waiting cluster holds its leases, new machine applies wait, and it proceeds once the operations in flight end", func() {
		ns := newNamespace()
		clk := fakeClock()
		cm, mm := newManager(clk, true), newHookedManager(clk, true)
		cluster := clusterOwner(ns)
		m1, m2, m3, m4 := machineOwner(ns, "m1"), machineOwner(ns, "m2"), poolOwner(ns, "p3"), machineOwner(ns, "m4")
		startMember := func(o runlease.Owner, seq int64) runlease.Result {
			res, err := mm.Acquire(ctx, request(o, seq, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			if res.Acquired {
				startJob(createJob(o, jobName(o, seq)))
			}
			return res
		}
		clusterPass := func() runlease.Result {
			res, err := cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			return res
		}

		By("two machine applies run")
		Expect(startMember(m1, 1).Acquired).To(BeTrue())
		Expect(startMember(m2, 1).Acquired).To(BeTrue())

		By("the cluster waits for both and keeps both of its leases")
		res := clusterPass()
		Expect(res.Acquired).To(BeFalse())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		Expect(res.Wait.Jobs).To(ConsistOf(jobName(m1, 1), jobName(m2, 1)))
		Expect(res.Wait.Lease).To(Equal(cluster.ClusterLeaseName()))
		Expect(holderOf(ns, cluster.RunLeaseName())).To(Equal(jobName(cluster, 1)))
		Expect(holderOf(ns, cluster.ClusterLeaseName())).To(Equal(jobName(cluster, 1)))
		firstMessage := res.Wait.Message

		By("for five minutes of requeues, new machine applies wait without taking their run leases")
		mm.noHook()
		seq := int64(2)
		for range 10 {
			clk.Step(30 * time.Second)
			for _, o := range []runlease.Owner{m3, m4} {
				r := startMember(o, seq)
				Expect(r.Acquired).To(BeFalse())
				Expect(r.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
				Expect(r.Wait.Jobs).To(Equal([]string{jobName(cluster, 1)}))
				Expect(getLease(ns, o.RunLeaseName())).To(BeNil())
			}
			seq++
			Expect(mm.Writes()).To(BeZero(), "a machine that sees the cluster's hold writes nothing the cluster could trip over")
			res = clusterPass()
			Expect(res.Acquired).To(BeFalse())
			Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		}
		Expect(res.Wait.Message).To(Equal(firstMessage), "the wait message is stable while the same Jobs are in flight")

		By("m1's apply ends: the cluster still waits for m2")
		finishJob(jobByName(ns, jobName(m1, 1)), true)
		res = clusterPass()
		Expect(res.Wait.Jobs).To(Equal([]string{jobName(m2, 1)}))

		By("m2's apply ends: the cluster proceeds at once, and machine applies still wait")
		finishJob(jobByName(ns, jobName(m2, 1)), false)
		res = clusterPass()
		Expect(res.Acquired).To(BeTrue())
		cj := createJob(cluster, jobName(cluster, 1))
		startJob(cj)
		clk.Step(10 * time.Minute) // the cluster's Job, not the grace, now holds the machines back
		Expect(startMember(m3, 100).Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))

		By("the cluster's apply ends and is counted: machine applies proceed")
		finishJob(cj, true)
		released, err := cm.Release(ctx, cluster, cj.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(released).To(ConsistOf(cluster.RunLeaseName(), cluster.ClusterLeaseName()))
		Expect(startMember(m3, 101).Acquired).To(BeTrue())
	})

	It("is not starved by a stream of machine applies running concurrently", func() {
		ns := newNamespace()
		clk := fakeClock()
		cluster := clusterOwner(ns)
		members := []runlease.Owner{machineOwner(ns, "s1"), machineOwner(ns, "s2"), poolOwner(ns, "s3")}

		var (
			clusterHolds atomic.Bool  // set once a cluster pass has returned (the cluster lease is held)
			released     atomic.Bool  // set right before the cluster releases its leases
			clusterRuns  atomic.Bool  // set once the cluster proceeded, cleared before its release
			inFlight     atomic.Int32 // member operations between acquired and released
			completed    atomic.Int32 // member operations that ran to the end
			lateAcquired atomic.Int32 // member acquisitions that started after the cluster held its lease and returned before it released
			overlap      atomic.Int32 // member acquisitions while the cluster ran
			stop         atomic.Bool
			holdNext     atomic.Bool // the first member keeps its next Job running until resume closes
		)
		held, resume := make(chan string, 1), make(chan struct{})
		var resumeOnce sync.Once
		var wg sync.WaitGroup
		// Whatever happens to the spec, the members stop before the control plane does.
		DeferCleanup(func() {
			stop.Store(true)
			resumeOnce.Do(func() { close(resume) })
			wg.Wait()
		})
		for i, o := range members {
			mgr := newManager(clk, true)
			wg.Go(func() {
				defer GinkgoRecover()
				for seq := int64(1); !stop.Load(); seq++ {
					after := clusterHolds.Load()
					res, err := mgr.Acquire(ctx, request(o, seq, infrav1.OperationApply))
					Expect(err).NotTo(HaveOccurred())
					if !res.Acquired {
						continue
					}
					inFlight.Add(1)
					if after && !released.Load() {
						lateAcquired.Add(1)
					}
					if clusterRuns.Load() {
						overlap.Add(1)
					}
					j := createJob(o, jobName(o, seq))
					startJob(j)
					if i == 0 && holdNext.CompareAndSwap(true, false) {
						held <- j.Name
						<-resume
					}
					finishJob(j, i%2 == 0)
					inFlight.Add(-1)
					_, err = mgr.Release(ctx, o, j.Name)
					Expect(err).NotTo(HaveOccurred())
					completed.Add(1)
				}
			})
		}
		By("machines and pools keep starting applies; one of them is in flight")
		Eventually(completed.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 6))
		holdNext.Store(true)
		var inflightJob string
		Eventually(held).WithTimeout(20 * time.Second).Should(Receive(&inflightJob))

		By("the cluster asks: it waits for the operation in flight and holds its leases")
		cm := newManager(clk, true)
		clusterPass := func() runlease.Result {
			res, err := cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			clusterHolds.Store(true)
			return res
		}
		passes := 0
		for range 5 {
			res := clusterPass()
			passes++
			Expect(res.Acquired).To(BeFalse())
			Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
			Expect(res.Wait.Jobs).To(ContainElement(inflightJob))
		}

		By("the operation in flight ends: the cluster proceeds within a few passes")
		resumeOnce.Do(func() { close(resume) })
		var res runlease.Result
		for !res.Acquired {
			res = clusterPass()
			passes++
			Expect(passes).To(BeNumerically("<", 200), "the cluster is starved")
		}
		clusterRuns.Store(true)
		Expect(inFlight.Load()).To(BeZero(), "the cluster proceeded while a member operation was in flight")
		cj := createJob(cluster, jobName(cluster, 1))
		startJob(cj)
		before := completed.Load()
		Consistently(completed.Load).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Equal(before))
		finishJob(cj, true)
		clusterRuns.Store(false)
		released.Store(true)
		_, err := cm.Release(ctx, cluster, cj.Name)
		Expect(err).NotTo(HaveOccurred())
		Eventually(completed.Load).WithTimeout(20*time.Second).Should(BeNumerically(">", before), "members proceed after the cluster")
		stop.Store(true)
		wg.Wait()
		fmt.Printf("writer preference under load: cluster waited 5 passes for %s, proceeded after %d passes in all; %d member applies completed; %d acquired after the cluster held its lease; %d overlapped the cluster's Job\n",
			inflightJob, passes, completed.Load(), lateAcquired.Load(), overlap.Load())
		Expect(lateAcquired.Load()).To(BeZero())
		Expect(overlap.Load()).To(BeZero())
	})

	It("lets plans and drift checks through on the run lease alone, never past their object's running apply, and gates a refresh like an apply", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster, m1, m2 := clusterOwner(ns), machineOwner(ns, "m1"), machineOwner(ns, "m2")

		By("a machine plan runs: a cluster apply does not wait for it")
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))
		startJob(createJob(m1, jobName(m1, 1)))
		Expect(m.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))

		By("the cluster's apply runs: a drift check of the cluster waits on its run lease (I1), past the grace too")
		startJob(createJob(cluster, jobName(cluster, 1)))
		clk.Step(10 * time.Minute)
		res, err := m.Acquire(ctx, request(cluster, 2, infrav1.OperationDrift))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse(), "a drift check must never run next to an apply of the same object")
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
		Expect(res.Wait.Condition).To(Equal(infrav1.DriftJobSucceededCondition))
		Expect(res.Wait.Jobs).To(Equal([]string{jobName(cluster, 1)}))

		By("the cluster lease is held: machine drift checks still proceed; a refresh, which writes the state, waits like an apply")
		Expect(m.Acquire(ctx, request(m2, 1, infrav1.OperationDrift))).To(HaveField("Acquired", true))
		Expect(m.Release(ctx, m2, jobName(m2, 1))).To(HaveLen(1))
		res, err = m.Acquire(ctx, request(m2, 2, infrav1.OperationRefresh))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse(), "a machine's refresh writes its state: it never runs beside its cluster's apply")
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
		Expect(res.Wait.Condition).To(Equal(infrav1.DriftJobSucceededCondition))
		res, err = m.Acquire(ctx, request(m2, 3, infrav1.OperationDestroy))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
		Expect(res.Wait.Condition).To(Equal(infrav1.ApplyJobSucceededCondition))
		res, err = m.Acquire(ctx, request(m2, 3, infrav1.OperationRestore))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Condition).To(Equal(infrav1.RestoreJobSucceededCondition))

		By("a cluster plan takes only its run lease")
		other := newNamespace()
		c2 := clusterOwner(other)
		Expect(m.Acquire(ctx, request(c2, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))
		Expect(getLease(other, c2.ClusterLeaseName())).To(BeNil())
	})

	It("never lets a refresh of a machine's hold for a drift check hide its mutating operation from the cluster", func() {
		ns := newNamespace()
		m := newManager(fakeClock(), true)
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")

		By("one pass takes the machine's run lease for an apply of run 1")
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		By("another pass, on a stale view, names the same run a drift check and refreshes the hold")
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationDrift))).To(HaveField("Acquired", true))
		Expect(getLease(ns, m1.RunLeaseName()).Annotations).To(HaveKeyWithValue(infrav1.LeaseOpAnnotation, string(infrav1.OperationApply)))

		By("the apply's Job is the one created: the cluster's apply must wait for it")
		startJob(createJob(m1, jobName(m1, 1)))
		res, err := m.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse(), "the cluster's apply would run next to the machine's apply (I5)")
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		Expect(res.Wait.Jobs).To(Equal([]string{jobName(m1, 1)}))

		By("a new holder's drift check names its own operation")
		Expect(m.Release(ctx, m1, jobName(m1, 1))).NotTo(BeEmpty())
		other := machineOwner(ns, "m2")
		Expect(m.Acquire(ctx, request(other, 1, infrav1.OperationDrift))).To(HaveField("Acquired", true))
		Expect(getLease(ns, other.RunLeaseName()).Annotations).To(HaveKeyWithValue(infrav1.LeaseOpAnnotation, string(infrav1.OperationDrift)))
	})

	It("names at most five Jobs when the cluster waits for many", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		var names []string
		for i := range 7 {
			o := machineOwner(ns, fmt.Sprintf("m%d", i))
			Expect(m.Acquire(ctx, request(o, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
			names = append(names, jobName(o, 1))
		}
		res, err := m.Acquire(ctx, request(clusterOwner(ns), 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Jobs).To(HaveLen(5))
		Expect(res.Wait.Message).To(ContainSubstring("7 mutating Job(s)"))
		Expect(res.Wait.Message).To(ContainSubstring("and 2 more"))
		for _, j := range res.Wait.Jobs {
			Expect(names).To(ContainElement(j))
		}
	})

	It("counts a cluster lease as held only by a Job of a TerraformCluster", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster, m1, m2 := clusterOwner(ns), machineOwner(ns, "m1"), machineOwner(ns, "m2")
		// A forged cluster lease, labelled as m1's, naming m1's running Job.
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))
		startJob(createJob(m1, jobName(m1, 1)))
		forged := objects.Lease(ns, cluster.ClusterLeaseName()).Labels(naming.OwnerLabels(m1.Kind, m1.Name, m1.Cluster, "")).
			Holder(jobName(m1, 1)).RenewTime(metav1.NewMicroTime(clk.Now())).Obj()
		Expect(admin.Create(ctx, forged)).To(Succeed())
		res, err := m.Acquire(ctx, request(m2, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason), "inside the grace any hold counts")
		clk.Step(2 * time.Minute)
		Expect(m.Acquire(ctx, request(m2, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
	})

	It("never hides a machine Job that already exists by giving its hold back", func() {
		ns := newNamespace()
		clk := fakeClock()
		cm, mm := newManager(clk, true), newHookedManager(clk, true)
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")
		By("a machine apply runs")
		Expect(mm.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		startJob(createJob(m1, jobName(m1, 1)))

		By("a pass on a stale cache asks again under the running Job's name; the cluster takes its lease right after that pass's write")
		clusterTook := mm.releaseAt(1, true)
		var clusterRes runlease.Result
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			<-clusterTook
			var err error
			clusterRes, err = cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
		}()
		mm.mu.Lock()
		hook := mm.hook
		mm.hook = func(n int, after bool) {
			hook(n, after)
			if n == 1 && after {
				<-done // the machine reads the cluster lease only once the cluster holds it
			}
		}
		mm.mu.Unlock()
		res, err := mm.Acquire(ctx, request(m1, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(clusterRes.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		Expect(res.Acquired).To(BeTrue(), "the Job exists: the caller's create meets AlreadyExists and adopts it")
		Expect(holderOf(ns, m1.RunLeaseName())).To(Equal(jobName(m1, 1)), "the hold of the running Job stays")

		By("the cluster still sees the machine's operation, and a later stale pass waits without touching the hold")
		Expect(cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Wait.Reason", infrav1.WaitingForMachineOperationsReason))
		mm.noHook()
		Expect(mm.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Wait.Reason", infrav1.WaitingForClusterOperationReason))
		Expect(holderOf(ns, m1.RunLeaseName())).To(Equal(jobName(m1, 1)))
		Expect(mm.Writes()).To(BeZero())
	})
})
