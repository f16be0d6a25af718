package e2e_test

import (
	"path/filepath"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// What the real kube-controller-manager does under CAPTF's Jobs (the sandbox runs it, with the
// real kube-scheduler; the executor is only the node).
var _ = Describe("the real garbage collector and Job controller under CAPTF's Jobs", func() {
	It("a Job deleted with kubectl delete --cascade=orphan mid-apply: the orphaned pod keeps the run lease while it runs, and no second apply runs beside it", func() {
		const ns, name = "orphan", "orphan"
		checkInvariants := watchInvariants(shared, ns)
		createNamespace(shared, ns)
		c := shared.Client()
		applyFixture(shared, ns, "cluster.yaml", name, 20)
		job := eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		pods := podsOf(job)
		Expect(pods).To(HaveLen(1))
		pod := pods[0]
		Expect(pod.OwnerReferences).NotTo(BeEmpty(), "the Job controller made the pod, owned by the Job")

		kubectl(shared, "delete", "job", "-n", ns, job.Name, "--cascade=orphan")

		By("the garbage collector orphans the pod: the Job goes, the pod runs on without its owner reference")
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))).To(BeTrue(), "the Job is gone")
			live := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), live)).To(Succeed())
			g.Expect(live.OwnerReferences).To(BeEmpty())
			g.Expect(live.Status.Phase).To(Equal(corev1.PodRunning))
		}).Should(Succeed())

		By("while the orphaned pod runs, the run lease names its Job and no other apply Job exists")
		lease := types.NamespacedName{Namespace: ns, Name: naming.RunLeaseName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}
		checks := 0
		Eventually(func() corev1.PodPhase {
			// Read the Jobs and the lease first, the pod last: if the pod still runs after, the
			// Jobs and the lease were read while it ran.
			others := jobsOf(shared, infrav1.TerraformClusterKind, ns, name, "")
			l := &coordinationv1.Lease{}
			Expect(c.Get(ctx, lease, l)).To(Succeed())
			live := &corev1.Pod{}
			Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), live)).To(Succeed())
			if live.Status.Phase == corev1.PodSucceeded || live.Status.Phase == corev1.PodFailed {
				return live.Status.Phase
			}
			Expect(others).To(BeEmpty(), "no Job of the object runs beside its orphaned pod")
			Expect(ptr.Deref(l.Spec.HolderIdentity, "")).To(Equal(job.Name), "the run lease follows the orphaned pod")
			checks++
			return live.Status.Phase
		}, 3*time.Minute, 500*time.Millisecond).Should(Equal(corev1.PodSucceeded), "the orphaned apply ends by itself")
		Expect(checks).To(BeNumerically(">=", 3), "the invariant was checked while the pod ran")
		AddReportEntry("checks of I1 while the orphaned pod ran", checks)

		By("once it ended, CAPTF runs the object to Ready again, and no two runs of it ever overlapped (I1)")
		eventuallyReady(shared, tc(ns, name))
		runs := runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, "")
		Expect(runs).NotTo(BeEmpty())
		Expect(overlapping(runs)).To(BeEmpty())
		var orphaned []executor.Run
		for _, r := range runs {
			if r.Pod == pod.Name {
				orphaned = append(orphaned, r)
			}
		}
		Expect(orphaned).To(HaveLen(1))
		Expect(orphaned[0].Phase).To(Equal(corev1.PodSucceeded), "the orphaned apply ran to its end")
		Eventually(func() []coordinationv1.Lease { return captfLeases(shared, ns) }).Should(BeEmpty(), "the run lease was released")

		By("the orphaned pod is left for a person to delete, as Kubernetes leaves it")
		Expect(c.Delete(ctx, &pod)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{}))
		}).Should(BeTrue())
		checkInvariants()
	})
})

var _ = Describe("the real namespace controller under CAPTF's objects", func() {
	It("kubectl delete namespace during an apply: refused, naming the object and what to do; once the Cluster and its destroy are gone, the namespace deletes", func() {
		const ns, name = "doomed", "doomed"
		checkInvariants := watchInvariants(shared, ns)
		createNamespace(shared, ns)
		c := shared.Client()
		applyFixture(shared, ns, "cluster.yaml", name, 20)
		job := eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)

		By("the API server refuses the deletion and says what to do; nothing in the namespace changes")
		out, err := run(shared.Kubeconfig(), "kubectl", "delete", "namespace", ns)
		Expect(err).To(HaveOccurred(), "the deletion was let through: %s", out)
		Expect(out).To(ContainSubstring("namespace " + ns + " holds TerraformCluster " + name))
		Expect(out).To(ContainSubstring("kubectl delete clusters.cluster.x-k8s.io --all -n " + ns))
		n := &corev1.Namespace{}
		Expect(c.Get(ctx, types.NamespacedName{Name: ns}, n)).To(Succeed())
		Expect(n.DeletionTimestamp).To(BeNil(), "the namespace is not terminating")
		live := &batchv1.Job{}
		Expect(c.Get(ctx, client.ObjectKeyFromObject(job), live)).To(Succeed(), "the running apply was left alone")
		Expect(live.DeletionTimestamp).To(BeNil())

		By("the apply runs to its end")
		eventuallyReady(shared, tc(ns, name))
		applies := runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		Expect(applies).To(HaveLen(1))
		Expect(applies[0].Phase).To(Equal(corev1.PodSucceeded), "the apply was not stopped by the deletion attempt")

		By("as the message says: delete the Cluster, wait until the CAPTF objects are gone, then the namespace")
		kubectl(shared, "delete", "clusters.cluster.x-k8s.io", "--all", "-n", ns)
		Eventually(func() string {
			return kubectl(shared, "get", "terraformclusters,terraformmachines,terraformmachinepools", "-n", ns, "-o", "name")
		}, 3*time.Minute).Should(BeEmpty(), "the destroy ran and the objects went")
		destroys := runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDestroy)
		Expect(destroys).To(HaveLen(1))
		Expect(destroys[0].Phase).To(Equal(corev1.PodSucceeded))
		kubectl(shared, "delete", "namespace", ns, "--timeout=2m")

		By("the namespace controller finished: the namespace is gone, nothing held it, and no two runs overlapped (I1)")
		Expect(apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}))).To(BeTrue())
		Expect(overlapping(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, ""))).To(BeEmpty())
		checkInvariants()
	})
})

var _ = Describe("the real node lifecycle and taint eviction controllers under CAPTF's Jobs", func() {
	It("a node that stops answering mid-apply: its pod is evicted but may still write, so nothing else runs until the node confirms it stopped", func() {
		// A sandbox of its own: the node is lost after 20 s without a heartbeat (a cluster waits
		// 50 s), and the pods of a lost node are evicted 10 s later (a cluster waits 300 s).
		sb := startSandboxWithManager("lossy", tf, filepath.Join(built, "manager"), func(o *sandbox.Options) {
			o.NodeMonitorGracePeriod = 20 * time.Second
			o.UnreachableTolerationSeconds = 10
		})
		DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
		const ns, name = "lost", "lost"
		checkInvariants := watchInvariants(sb, ns)
		createNamespace(sb, ns)
		c := sb.Client()
		applyFixture(sb, ns, "cluster.yaml", name, 150)
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		var pods corev1.PodList
		Expect(c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pod := pods.Items[0]

		// With every node of a zone lost, the node lifecycle controller takes it for a control
		// plane problem and evicts nothing (full disruption): another, healthy node (which takes
		// no pod) keeps the zone in its normal state, as in a cluster of more than one node.
		keepSpareNode(sb, "captf-spare")

		By("the node is cut off the API server; its containers run on")
		ex := sb.Executor()
		ex.Partition(true)
		DeferCleanup(ex.Partition, false)
		cut := time.Now()
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(c.Get(ctx, types.NamespacedName{Name: ex.NodeName()}, n)).To(Succeed())
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", corev1.TaintNodeUnreachable)))
		}, 2*time.Minute).Should(Succeed(), "the node lifecycle controller taints the lost node")
		Eventually(func(g Gomega) {
			live := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), live)).To(Succeed())
			g.Expect(live.DeletionTimestamp).NotTo(BeNil())
		}, 2*time.Minute).Should(Succeed(), "the taint eviction controller deletes the pod of the lost node")
		AddReportEntry("node cut off to its pod evicted", since(cut))

		By("while the lost node may still run the pod, the Job stays active, its lease held, and no other Job of the object exists")
		lease := types.NamespacedName{Namespace: ns, Name: naming.RunLeaseName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}
		Consistently(func(g Gomega) {
			jobsNow := jobsOf(sb, infrav1.TerraformClusterKind, ns, name, "")
			g.Expect(jobsNow).To(HaveLen(1))
			g.Expect(jobsNow[0].UID).To(Equal(job.UID))
			g.Expect(condition(&jobsNow[0], batchv1.JobFailed)).To(BeNil(), "the Job controller waits for the evicted pod (podReplacementPolicy Failed)")
			l := &coordinationv1.Lease{}
			g.Expect(c.Get(ctx, lease, l)).To(Succeed())
			g.Expect(ptr.Deref(l.Spec.HolderIdentity, "")).To(Equal(job.Name))
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{})).To(Succeed(), "the pod stays until its node confirms it stopped")
		}, 20*time.Second, time.Second).Should(Succeed())
		Expect(runsOf(ex.Runs(), infrav1.TerraformClusterKind, ns, name, "")).To(BeEmpty(), "the container still runs on the lost node")

		By("the next apply should be quick: the slow resource sleeps 1 s")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"sleep_seconds":1}}}`)

		By("healed: the node stops the evicted pod (SIGTERM), the Job fails, and CAPTF applies again; no two runs of the object overlapped (I1)")
		ex.Partition(false)
		Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{}))
		}).Should(BeTrue())
		failed := eventuallyFinished(sb, job)
		Expect(condition(failed, batchv1.JobFailed)).NotTo(BeNil())
		Eventually(func(g Gomega) {
			r := readyCondition(sb, tc(ns, name))
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Status).To(Equal(metav1.ConditionTrue))
		}, 5*time.Minute).Should(Succeed(), "the failed apply is retried and converges")
		runs := runsOf(ex.Runs(), infrav1.TerraformClusterKind, ns, name, "")
		Expect(len(runs)).To(BeNumerically(">=", 2))
		Expect(overlapping(runs)).To(BeEmpty())
		for _, r := range runs {
			if r.Pod == pod.Name {
				Expect(r.Reason).To(Equal("Terminated"), "the evicted run was stopped by SIGTERM once its node heard of the eviction")
			}
		}
		checkInvariants()
	})
})

// keepSpareNode registers a Ready node that takes no pod (tainted NoSchedule) and keeps its node
// Lease fresh until the spec ends.
func keepSpareNode(sb target, name string) {
	GinkgoHelper()
	c := sb.Client()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "captf.io/spare", Effect: corev1.TaintEffectNoSchedule}}}}
	Expect(c.Create(ctx, n)).To(Succeed())
	// The node lifecycle controller taints a new node that reports no Ready condition yet, so
	// the status write may meet a newer version: read it again and retry.
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}}
		return c.Status().Update(ctx, n)
	})).To(Succeed())
	l := objects.Lease(executor.NodeLeaseNamespace, name).Holder(name).RenewTime(metav1.NowMicro()).
		With(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](40) }).Obj()
	Expect(c.Create(ctx, l)).To(Succeed())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			cur := &coordinationv1.Lease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(l), cur); err == nil {
				cur.Spec.RenewTime = ptr.To(metav1.NowMicro())
				_ = c.Update(ctx, cur)
			}
		}
	}()
	DeferCleanup(func() { close(stop); <-done })
}

// overlapping returns each pair of runs (as "podA/podB") whose lifetimes overlap.
func overlapping(runs []executor.Run) []string {
	sorted := append([]executor.Run(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Started.Before(sorted[j].Started) })
	var out []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Started.Before(sorted[i-1].Finished) {
			out = append(out, sorted[i-1].Pod+"/"+sorted[i].Pod)
		}
	}
	return out
}
