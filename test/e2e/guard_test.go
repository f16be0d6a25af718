package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

var _ = Describe("kubectl against the sandbox while a Job runs", func() {
	It("is refused removing block-move or the finalizer, and a paused object loses block-move once the Job ended", func() {
		const ns, name = "guard", "guarded"
		createNamespace(shared, ns)
		applyFixture(shared, ns, "cluster.yaml", name, 15)
		job := eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		lease := naming.RunLeaseName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))

		By("removing block-move is denied with the guard's message")
		out, err := run(shared.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, infrav1.BlockMoveAnnotation+"-")
		Expect(err).To(HaveOccurred(), "kubectl removed block-move while Job %s runs: %s", job.Name, out)
		Expect(out).To(ContainSubstring("CAPTF guard"))
		Expect(out).To(ContainSubstring(job.Name))
		Expect(out).To(ContainSubstring(lease))

		By("removing the finalizer is denied too")
		out, err = run(shared.Kubeconfig(), "kubectl", "patch", "-n", ns, "terraformcluster", name, "--type=json",
			"-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		Expect(err).To(HaveOccurred(), "kubectl removed the finalizer while Job %s runs: %s", job.Name, out)
		Expect(out).To(ContainSubstring("CAPTF guard"))
		Expect(out).To(ContainSubstring(job.Name))

		By("both marks are still there")
		o := tc(ns, name)
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
		Expect(o.Finalizers).To(ContainElement(infrav1.Finalizer))

		By("pausing is allowed; block-move stays while the Job runs and goes by itself after it")
		kubectl(shared, "annotate", "-n", ns, "terraformcluster", name, infrav1.PausedAnnotation+"=")
		Consistently(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
		}, 3*time.Second).Should(Succeed())
		finished := eventuallyFinished(shared, job)
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.BlockMoveAnnotation))
			c := meta.FindStatusCondition(o.Status.Conditions, infrav1.PausedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		AddReportEntry("block-move cleared after the Job completed (paused)", since(finished.Status.CompletionTime.Time))
		Expect(o.Status.IsProvisioned()).To(BeTrue(), "the apply that ran while paused was counted")
		Expect(o.Status.ActiveJob).To(BeNil())
		Expect(captfLeases(shared, ns)).To(BeEmpty())

		By("unpaused, it stays Ready without another apply")
		kubectl(shared, "annotate", "-n", ns, "terraformcluster", name, infrav1.PausedAnnotation+"-")
		eventuallyReady(shared, tc(ns, name))
		Consistently(func() int {
			return len(jobsOf(shared, infrav1.TerraformClusterKind, ns, name, ""))
		}, 3*time.Second).Should(Equal(1))
	})
})
