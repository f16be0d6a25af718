package e2e_test

import (
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// What the real kube-controller-manager does under CAPTF's Jobs (the sandbox runs it, with the
// real kube-scheduler; the executor is only the node).
var _ = Describe("the real garbage collector and Job controller under CAPTF's Jobs", func() {
	It("a Job deleted with kubectl delete --cascade=orphan mid-apply: the orphaned pod keeps the run lease while it runs, and no second apply runs beside it", func() {
		const ns, name = "orphan", "orphan"
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
	})
})

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
