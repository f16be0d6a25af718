package runlease_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("Release", func() {
	It("keeps a lease that another holder took between the read and the delete", func() {
		ns := newNamespace()
		clk := fakeClock()
		owner := machineOwner(ns, "m1")
		rival := newManager(clk, true)
		Expect(rival.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		j := createJob(owner, jobName(owner, 1))
		finishJob(j, true)

		// Between Release's live read (holder 1) and its delete, a rival takes the free lease
		// over for Job 2.
		base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		retakes := 0
		c := interceptor.NewClient(base, interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				res, err := rival.Acquire(ctx, request(owner, 2, infrav1.OperationApply))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Acquired).To(BeTrue())
				retakes++
				return c.Delete(ctx, obj, opts...)
			},
		})
		m := runlease.New(c, base, options(clk, true))
		released, err := m.Release(ctx, owner, j.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(retakes).To(Equal(1), "the delete was attempted after the read")
		Expect(released).To(BeEmpty())
		Expect(holderOf(ns, owner.RunLeaseName())).To(Equal(jobName(owner, 2)), "the lease the rival took survives")
	})

	It("gives back only what the holder holds: both leases of a cluster, the run lease of a machine", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")
		Expect(m.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))

		By("another holder's name releases nothing")
		Expect(m.Release(ctx, cluster, jobName(cluster, 2))).To(BeEmpty())
		Expect(m.Release(ctx, m1, jobName(cluster, 1))).To(BeEmpty())
		Expect(getLease(ns, cluster.RunLeaseName())).NotTo(BeNil())
		Expect(getLease(ns, cluster.ClusterLeaseName())).NotTo(BeNil())

		By("the holder releases its leases")
		Expect(m.Release(ctx, m1, jobName(m1, 1))).To(Equal([]string{m1.RunLeaseName()}))
		Expect(getLease(ns, cluster.ClusterLeaseName())).NotTo(BeNil(), "a machine never releases the cluster lease")
		Expect(m.Release(ctx, cluster, jobName(cluster, 1))).To(ConsistOf(cluster.RunLeaseName(), cluster.ClusterLeaseName()))
		Expect(getLease(ns, cluster.RunLeaseName())).To(BeNil())
		Expect(getLease(ns, cluster.ClusterLeaseName())).To(BeNil())
		Expect(m.Release(ctx, cluster, jobName(cluster, 1))).To(BeEmpty(), "releasing twice is harmless")
	})

	It("after a rejected create, releases only when a live read shows no Job of that name", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster := clusterOwner(ns)
		Expect(m.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))

		By("a Job of that name exists (an earlier pass created it; this pass's cache lags): keep")
		createJob(cluster, jobName(cluster, 1))
		absent, released, err := m.ReleaseIfNoJob(ctx, cluster, jobName(cluster, 1))
		Expect(err).NotTo(HaveOccurred())
		Expect(absent).To(BeFalse())
		Expect(released).To(BeEmpty())
		Expect(holderOf(ns, cluster.RunLeaseName())).To(Equal(jobName(cluster, 1)))

		By("no Job of that name: both leases go at once")
		clk.Step(10 * time.Minute)
		Expect(m.Acquire(ctx, request(cluster, 2, infrav1.OperationApply))).To(HaveField("Acquired", false), "Job 1 runs")
		finishJob(jobByName(ns, jobName(cluster, 1)), false)
		Expect(m.Acquire(ctx, request(cluster, 2, infrav1.OperationApply))).To(HaveField("Acquired", true))
		absent, released, err = m.ReleaseIfNoJob(ctx, cluster, jobName(cluster, 2))
		Expect(err).NotTo(HaveOccurred())
		Expect(absent).To(BeTrue())
		Expect(released).To(ConsistOf(cluster.RunLeaseName(), cluster.ClusterLeaseName()))
	})

	It("confirms a hold right before the create, and notices one that was lost", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster := clusterOwner(ns)
		req := request(cluster, 1, infrav1.OperationApply)
		Expect(m.Acquire(ctx, req)).To(HaveField("Acquired", true))
		Expect(m.Confirm(ctx, req)).To(BeTrue())
		l := getLease(ns, cluster.ClusterLeaseName())
		l.Spec.HolderIdentity = ptr.To("someone-else")
		Expect(admin.Update(ctx, l)).To(Succeed())
		Expect(m.Confirm(ctx, req)).To(BeFalse(), "the cluster lease is no longer ours")
		Expect(m.Confirm(ctx, request(cluster, 1, infrav1.OperationPlan))).To(BeTrue(), "a plan needs the run lease only")
		Expect(admin.Delete(ctx, getLease(ns, cluster.RunLeaseName()))).To(Succeed())
		Expect(m.Confirm(ctx, request(cluster, 1, infrav1.OperationPlan))).To(BeFalse())
	})
})

var _ = Describe("Cleanup", func() {
	It("deletes every free run and cluster lease the object owns, and never the Terraform lock or another object's", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")
		Expect(m.Acquire(ctx, request(cluster, 1, infrav1.OperationDestroy))).To(HaveField("Acquired", true))
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))
		ownerLabels := naming.OwnerLabels(cluster.Kind, cluster.Name, cluster.Cluster, "")
		lock := func(name string, extra map[string]string) {
			Expect(admin.Create(ctx, objects.Lease(ns, name).Labels(ownerLabels).Labels(extra).Obj())).To(Succeed())
		}
		// The backend's lock, even if something labelled it like CAPTF's own leases.
		lockName := naming.StateLockLeaseName(cluster.Suffix())
		lock(lockName, nil)
		lock(naming.StateLockLeaseName("0123456789abcdef"), map[string]string{infrav1.LeaseLabel: infrav1.LeaseKindRun})
		// Some other Lease that carries the owner labels but is not one of CAPTF's two kinds.
		lock("someone-elses-lease", nil)

		By("the destroy Job was created and runs: its leases are live and kept")
		dj := createJob(cluster, jobName(cluster, 1))
		startJob(dj)
		kept, err := m.Cleanup(ctx, cluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept).To(ConsistOf(cluster.RunLeaseName(), cluster.ClusterLeaseName()))

		By("the destroy Job finished: both go, the locks and the machine's lease stay")
		createPod(ns, dj.Name, runlease.JobNameLabel, corev1.PodSucceeded)
		finishJob(dj, true)
		kept, err = m.Cleanup(ctx, cluster)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept).To(BeEmpty())
		Expect(getLease(ns, cluster.RunLeaseName())).To(BeNil())
		Expect(getLease(ns, cluster.ClusterLeaseName())).To(BeNil())
		Expect(getLease(ns, lockName)).NotTo(BeNil())
		Expect(getLease(ns, naming.StateLockLeaseName("0123456789abcdef"))).NotTo(BeNil())
		Expect(getLease(ns, "someone-elses-lease")).NotTo(BeNil())
		Expect(getLease(ns, m1.RunLeaseName())).NotTo(BeNil())

		By("a hold whose Job was never created is kept inside the grace and deleted past it")
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationPlan))).To(HaveField("Acquired", true))
		kept, err = m.Cleanup(ctx, m1)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept).To(Equal([]string{m1.RunLeaseName()}))
		clk.Step(61 * time.Second)
		kept, err = m.Cleanup(ctx, m1)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept).To(BeEmpty())
		Expect(getLease(ns, m1.RunLeaseName())).To(BeNil())
	})
})

var _ = Describe("RunEvidence", func() {
	It("reports, live, whether a Job of this object runs or may still be created", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner := machineOwner(ns, "m1")
		evidence := func() runlease.Evidence {
			e, err := m.RunEvidence(ctx, owner)
			Expect(err).NotTo(HaveOccurred())
			return e
		}

		By("no lease")
		e := evidence()
		Expect(e.Found).To(BeFalse())
		Expect(e.Live()).To(BeFalse())
		Expect(e.LeaseName).To(Equal(owner.RunLeaseName()))

		By("a lease inside the grace, its Job not yet on the API server")
		Expect(m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		acquiredAt := clk.Now()
		clk.Step(20 * time.Second)
		e = evidence()
		Expect(e.Live()).To(BeTrue())
		Expect(e.MayStillBeCreated()).To(BeTrue())
		Expect(e.HolderRuns()).To(BeFalse())
		Expect(e.Holder).To(Equal(jobName(owner, 1)))
		Expect(e.Operation).To(Equal(infrav1.OperationApply))
		Expect(e.AcquiredAt.Equal(acquiredAt)).To(BeTrue())
		Expect(e.Job).To(BeNil())

		By("the Job runs")
		j := createJob(owner, jobName(owner, 1))
		startJob(j)
		clk.Step(time.Hour)
		e = evidence()
		Expect(e.Live()).To(BeTrue())
		Expect(e.HolderRuns()).To(BeTrue())
		Expect(e.MayStillBeCreated()).To(BeFalse())
		Expect(e.Job).NotTo(BeNil())
		Expect(e.Job.Name).To(Equal(j.Name))
		Expect(e.JobOfOwner).To(BeTrue())
		v, job, err := m.Judge(ctx, getLease(ns, owner.RunLeaseName()), owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal(e.Verdict), "Judge and RunEvidence apply the same rules")
		Expect(job.Name).To(Equal(j.Name))

		By("the Job finished but its pod still terminates")
		pod := createPod(ns, j.Name, runlease.JobNameLabel, corev1.PodRunning)
		finishJob(j, true)
		e = evidence()
		Expect(e.HolderRuns()).To(BeTrue())
		Expect(e.Verdict.Reason).To(Equal(runlease.LivePodsRunning))

		By("and then nothing runs")
		setPodPhase(pod, corev1.PodSucceeded)
		e = evidence()
		Expect(e.Live()).To(BeFalse())
		Expect(e.Verdict.Reason).To(Equal(runlease.FreeHolderFinished))
	})

	It("keeps a lease whose Job was deleted with propagation Orphan live while the orphaned pod runs, past the backstop, and frees it once the pod ended", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner := machineOwner(ns, "m1")
		Expect(m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		j := createJob(owner, jobName(owner, 1))
		startJob(j)
		// The pod as the Job controller makes it: the template's owner labels and the Job's name.
		pod := createPod(ns, j.Name, runlease.JobNameLabel, corev1.PodRunning)
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		for k, v := range naming.OwnerLabels(owner.Kind, owner.Name, owner.Cluster, "") {
			pod.Labels[k] = v
		}
		Expect(admin.Update(ctx, pod)).To(Succeed())
		// No garbage collector runs here, so a background deletion leaves the pod as the real
		// one leaves an orphan: running, its Job gone (test/e2e shows it with the real one).
		Expect(admin.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(j), &batchv1.Job{}))
		}).Should(BeTrue())

		clk.Step(m.Options().Backstop(0) + 24*time.Hour)
		e, err := m.RunEvidence(ctx, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Verdict.Reason).To(Equal(runlease.LivePodsRunning), "no deadline ends an orphaned pod: the lease follows it")
		Expect(e.HolderRuns()).To(BeTrue())
		Expect(m.Acquire(ctx, request(owner, 2, infrav1.OperationApply))).To(HaveField("Acquired", false))

		setPodPhase(pod, corev1.PodSucceeded)
		e, err = m.RunEvidence(ctx, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Live()).To(BeFalse())
		Expect(e.Verdict.Reason).To(Equal(runlease.FreePastBackstop))
		Expect(m.Acquire(ctx, request(owner, 2, infrav1.OperationApply))).To(HaveField("Acquired", true))
	})

	It("judges a lease by the object asked about, not by the labels the lease claims", func() {
		ns := newNamespace()
		clk := fakeClock()
		m := newManager(clk, true)
		owner, other := machineOwner(ns, "m1"), machineOwner(ns, "m2")
		// A forged run lease of m1 that claims to be m2's and names m2's running Job.
		oj := createJob(other, jobName(other, 1))
		startJob(oj)
		forged := objects.Lease(ns, owner.RunLeaseName()).Labels(naming.OwnerLabels(other.Kind, other.Name, other.Cluster, "")).
			Holder(oj.Name).RenewTime(metav1.NewMicroTime(clk.Now())).Obj()
		Expect(admin.Create(ctx, forged)).To(Succeed())
		Expect(m.RunEvidence(ctx, owner)).To(HaveField("Verdict.Reason", runlease.LiveWithinGrace))
		clk.Step(2 * time.Minute)
		e, err := m.RunEvidence(ctx, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.Live()).To(BeFalse())
		Expect(e.JobOfOwner).To(BeFalse())
		Expect(e.Verdict.Reason).To(Equal(runlease.FreeHolderForeign))
		Expect(m.Acquire(ctx, request(owner, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
	})
})
