package runlease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("Acquire", func() {
	It("lets exactly one of 8 concurrent acquirers (separate clients) win, in each of 100 rounds", func() {
		const rounds, acquirers = 100, 8
		ns := newNamespace()
		clk := fakeClock()
		owner := machineOwner(ns, "m-race")
		managers := make([]*runlease.Manager, acquirers)
		for i := range managers {
			managers[i] = newManager(clk, true)
		}
		lease := owner.RunLeaseName()
		var exactlyOne, creates, noHolder, pastGrace int
		for round := range rounds {
			// Three starting points, in turn: no lease (the race is between creates), a lease
			// with no holder, and a lease whose holder Job never appeared and is past the grace
			// (both races are between updates carrying the same resourceVersion).
			switch round % 3 {
			case 0:
				deleteAllLeases(ns)
				creates++
			case 1:
				l := getLease(ns, lease)
				l.Spec.HolderIdentity = nil
				Expect(admin.Update(ctx, l)).To(Succeed())
				noHolder++
			case 2:
				clk.Step(61 * time.Second)
				pastGrace++
			}
			start := make(chan struct{})
			results := make([]runlease.Result, acquirers)
			errs := make([]error, acquirers)
			var wg sync.WaitGroup
			for i := range acquirers {
				wg.Go(func() {
					<-start
					results[i], errs[i] = managers[i].Acquire(ctx, runlease.Request{Owner: owner,
						Holder: jobName(owner, int64(round*acquirers+i)), Operation: infrav1.OperationApply})
				})
			}
			close(start)
			wg.Wait()
			winners := []int{}
			for i := range acquirers {
				Expect(errs[i]).NotTo(HaveOccurred())
				if results[i].Acquired {
					winners = append(winners, i)
				} else {
					Expect(results[i].Wait).NotTo(BeNil())
					Expect(results[i].Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
				}
			}
			Expect(winners).To(HaveLen(1), "round %d", round)
			Expect(holderOf(ns, lease)).To(Equal(jobName(owner, int64(round*acquirers+winners[0]))))
			exactlyOne++
		}
		fmt.Printf("run lease race: %d rounds x %d acquirers, exactly one winner in %d rounds (%d create races, %d no-holder takeovers, %d past-grace takeovers)\n",
			rounds, acquirers, exactlyOne, creates, noHolder, pastGrace)
		Expect(exactlyOne).To(Equal(rounds))
	})

	It("writes the lease with its owner labels, operation, holder and a backstop from the deadline", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner := clusterOwner(ns)
		req := request(owner, 3, infrav1.OperationApply)
		req.ActiveDeadlineSeconds = 120
		res, err := m.Acquire(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue())
		for name, kind := range map[string]string{owner.RunLeaseName(): infrav1.LeaseKindRun, owner.ClusterLeaseName(): infrav1.LeaseKindCluster} {
			l := getLease(ns, name)
			Expect(l).NotTo(BeNil())
			Expect(l.Labels).To(Equal(map[string]string{
				infrav1.LeaseLabel: kind, infrav1.ManagedLabel: "true",
				infrav1.OwnerKindLabel: infrav1.TerraformClusterKind, infrav1.OwnerNameLabel: "tc",
				infrav1.ClusterNameLabel: "c1",
			}))
			Expect(l.Annotations).To(HaveKeyWithValue(infrav1.LeaseOpAnnotation, "Apply"))
			Expect(l.Annotations).To(HaveKeyWithValue(infrav1.LeaseAcquiredAtAnnotation, clk.Now().UTC().Format(time.RFC3339)))
			Expect(*l.Spec.HolderIdentity).To(Equal(req.Holder))
			Expect(*l.Spec.LeaseDurationSeconds).To(Equal(int32(120 + 600 + 300)))
			Expect(l.Spec.RenewTime.Time.Equal(clk.Now())).To(BeTrue())
		}
		Expect(owner.RunLeaseName()).To(Equal(naming.RunLeaseName(owner.Suffix())))
		Expect(owner.ClusterLeaseName()).To(Equal(naming.ClusterLeaseName(ns, "c1")))

		By("a plan takes the run lease only, with the default backstop")
		m2 := owner
		m2.Kind, m2.Name = infrav1.TerraformMachineKind, "m-plan"
		res, err = m.Acquire(ctx, request(m2, 1, infrav1.OperationPlan))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue())
		Expect(*getLease(ns, m2.RunLeaseName()).Spec.LeaseDurationSeconds).To(Equal(int32(4500)))
	})

	It("refreshes its own hold at once and takes over a free lease, and only a free one", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner := machineOwner(ns, "m1")
		lease := owner.RunLeaseName()
		acquire := func(seq int64) runlease.Result {
			res, err := m.Acquire(ctx, request(owner, seq, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			return res
		}

		Expect(acquire(1).Acquired).To(BeTrue())
		By("the same holder refreshes its hold, and the refresh restarts the grace")
		clk.Step(50 * time.Second)
		Expect(acquire(1).Acquired).To(BeTrue())
		Expect(getLease(ns, lease).Spec.RenewTime.Time.Equal(clk.Now())).To(BeTrue())
		clk.Step(50 * time.Second)
		res := acquire(2)
		Expect(res.Acquired).To(BeFalse(), "holder 1 refreshed 50s ago: still inside the grace")
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
		Expect(res.Wait.Condition).To(Equal(infrav1.ApplyJobSucceededCondition))
		Expect(res.Wait.Jobs).To(Equal([]string{jobName(owner, 1)}))
		Expect(res.Wait.RequeueAfter).To(Equal(30 * time.Second))
		Expect(res.Wait.Message).To(ContainSubstring(jobName(owner, 1)))
		Expect(res.Wait.Message).To(ContainSubstring(lease))

		By("a running Job of this object keeps the lease past the grace")
		j1 := createJob(owner, jobName(owner, 1))
		startJob(j1)
		clk.Step(10 * time.Minute)
		Expect(acquire(2).Acquired).To(BeFalse())

		By("a finished Job whose pod still runs keeps it")
		pod := createPod(ns, j1.Name, runlease.JobNameLabel, corev1.PodRunning)
		finishJob(j1, false)
		Expect(acquire(2).Acquired).To(BeFalse())
		By("once the pod ends, the lease is free and taken over")
		setPodPhase(pod, corev1.PodFailed)
		Expect(acquire(2).Acquired).To(BeTrue())
		Expect(holderOf(ns, lease)).To(Equal(jobName(owner, 2)))
		Expect(*getLease(ns, lease).Spec.LeaseTransitions).To(BeNumerically(">=", 1))

		By("a Job of another object under the holder name backs nothing past the grace")
		other := machineOwner(ns, "m2")
		foreign := createJob(other, jobName(owner, 2))
		startJob(foreign)
		clk.Step(30 * time.Second)
		Expect(acquire(3).Acquired).To(BeFalse(), "inside the grace")
		clk.Step(31 * time.Second)
		Expect(acquire(3).Acquired).To(BeTrue())

		By("an orphaned pod of a deleted holder Job keeps the lease past the grace")
		orphan := createPod(ns, jobName(owner, 3), runlease.LegacyJobNameLabel, corev1.PodRunning)
		clk.Step(5 * time.Minute)
		Expect(acquire(4).Acquired).To(BeFalse())
		setPodPhase(orphan, corev1.PodSucceeded)
		Expect(acquire(4).Acquired).To(BeTrue())

		By("past the backstop a lease is free whatever its holder")
		j4 := createJob(owner, jobName(owner, 4))
		startJob(j4)
		clk.Step(4500 * time.Second)
		Expect(acquire(5).Acquired).To(BeFalse(), "exactly at the backstop")
		clk.Step(time.Second)
		Expect(acquire(5).Acquired).To(BeTrue())
	})

	It("treats a forged lease without a Job as live only inside the grace", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner := machineOwner(ns, "m1")
		forged := objects.Lease(ns, owner.RunLeaseName()).Labels(naming.OwnerLabels(owner.Kind, owner.Name, owner.Cluster, "")).
			Holder("captf-forged-1").RenewTime(metav1.NewMicroTime(clk.Now())).
			With(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To(int32(1 << 30)) }).Obj()
		Expect(admin.Create(ctx, forged)).To(Succeed())
		res, err := m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		Expect(res.Wait.Jobs).To(Equal([]string{"captf-forged-1"}))
		clk.Step(61 * time.Second)
		res, err = m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue(), "a forged lease with a huge duration but no Job is free past the grace")
	})

	It("reports a lost update or a lost create as not acquired, with exactly one write and no retry", func() {
		ns := newNamespace()
		clk := fakeClock()
		owner := machineOwner(ns, "m1")
		rival := newManager(clk, true)

		var creates, updates atomic.Int32
		base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		var beforeWrite func()
		c := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				creates.Add(1)
				beforeWrite()
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				updates.Add(1)
				beforeWrite()
				return c.Update(ctx, obj, opts...)
			},
		})
		var leaseReads atomic.Int32 // reads of the run lease
		reader := interceptor.NewClient(base, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*coordinationv1.Lease); ok && key.Name == owner.RunLeaseName() {
					leaseReads.Add(1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		m := runlease.New(c, reader, options(clk, true))

		By("a rival creates the lease between our read and our create")
		beforeWrite = func() {
			res, err := rival.Acquire(ctx, request(owner, 9, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Acquired).To(BeTrue())
		}
		res, err := m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
		Expect(creates.Load()).To(Equal(int32(1)))
		Expect(updates.Load()).To(BeZero())
		Expect(leaseReads.Load()).To(Equal(int32(1)), "one read, one write: no retry")
		Expect(holderOf(ns, owner.RunLeaseName())).To(Equal(jobName(owner, 9)))

		By("a rival takes the free lease between our read and our update")
		clk.Step(2 * time.Minute) // holder 9 never created its Job: free
		creates.Store(0)
		leaseReads.Store(0)
		beforeWrite = func() {
			res, err := rival.Acquire(ctx, request(owner, 10, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Acquired).To(BeTrue())
		}
		res, err = m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		Expect(updates.Load()).To(Equal(int32(1)))
		Expect(creates.Load()).To(BeZero())
		Expect(leaseReads.Load()).To(Equal(int32(1)), "one read, one write: no retry")
		Expect(holderOf(ns, owner.RunLeaseName())).To(Equal(jobName(owner, 10)))
	})

	It("decides on the live reader, never on the client it writes with", func() {
		ns := newNamespace()
		clk := fakeClock()
		live := newManager(clk, true)
		owner, cluster, m2 := machineOwner(ns, "m1"), clusterOwner(ns), machineOwner(ns, "m2")

		// The writing client behaves like a cache that has seen nothing: every Get is NotFound
		// and every List is empty. Only the live reader knows the truth.
		base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		blind := interceptor.NewClient(base, interceptor.Funcs{
			Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
				return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
			},
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return nil },
		})
		m := runlease.New(blind, base, options(clk, true))

		By("its own hold: refreshed, not mistaken for a missing lease")
		Expect(m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		clk.Step(10 * time.Second)
		Expect(m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))

		By("a running holder Job keeps the lease past the grace")
		j := createJob(owner, jobName(owner, 1))
		startJob(j)
		clk.Step(10 * time.Minute)
		res, err := m.Acquire(ctx, request(owner, 2, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse(), "the holder Job runs; a blind cache must not free its lease")

		By("a finished holder whose pod still runs keeps it too")
		createPod(ns, j.Name, runlease.JobNameLabel, corev1.PodRunning)
		finishJob(j, true)
		Expect(m.Acquire(ctx, request(owner, 2, infrav1.OperationApply))).To(HaveField("Acquired", false))
		Expect(holderOf(ns, owner.RunLeaseName())).To(Equal(j.Name))

		By("the cluster sees the machine operation in flight")
		Expect(live.Acquire(ctx, request(m2, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		startJob(createJob(m2, jobName(m2, 1)))
		Expect(m.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Wait.Reason", infrav1.WaitingForMachineOperationsReason))

		By("a machine sees the cluster lease")
		m3 := machineOwner(ns, "m3")
		Expect(m.Acquire(ctx, request(m3, 1, infrav1.OperationApply))).To(HaveField("Wait.Reason", infrav1.WaitingForClusterOperationReason))

		By("evidence, confirmation, cleanup and release read live as well")
		e, err := m.RunEvidence(ctx, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Live()).To(BeTrue())
		Expect(e.HolderRuns()).To(BeTrue())
		Expect(m.Confirm(ctx, request(cluster, 1, infrav1.OperationApply))).To(BeTrue())
		Expect(m.Cleanup(ctx, owner)).To(Equal([]string{owner.RunLeaseName()}))
		Expect(m.Release(ctx, cluster, jobName(cluster, 1))).To(ConsistOf(cluster.RunLeaseName(), cluster.ClusterLeaseName()))
	})

	It("rejects requests it cannot judge", func() {
		ns := newNamespace()
		m := newManager(fakeClock(), true)
		for _, req := range []runlease.Request{
			{Owner: runlease.Owner{Namespace: ns, Kind: "Pod", Name: "p"}, Holder: "j", Operation: infrav1.OperationApply},
			{Owner: machineOwner(ns, "m"), Operation: infrav1.OperationApply},
			{Owner: machineOwner(ns, "m"), Holder: "j", Operation: "Dance"},
			{Owner: runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachineKind, Name: "m"}, Holder: "j", Operation: infrav1.OperationApply},
			{Owner: runlease.Owner{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: "c"}, Holder: "j", Operation: infrav1.OperationDestroy},
		} {
			_, err := m.Acquire(ctx, req)
			Expect(err).To(HaveOccurred(), "%+v", req)
		}
		var leases coordinationv1.LeaseList
		Expect(admin.List(ctx, &leases, client.InNamespace(ns))).To(Succeed())
		Expect(leases.Items).To(BeEmpty(), "a rejected request takes nothing")

		By("without a cluster name, only the gate needs one: plans, and everything with the gate off, go through")
		noCluster := runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachineKind, Name: "m"}
		Expect(m.Acquire(ctx, runlease.Request{Owner: noCluster, Holder: "j", Operation: infrav1.OperationPlan})).To(HaveField("Acquired", true))
	})
})
