package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("the manager killed in the middle of an apply", func() {
	It("restarts, adopts the running Job and the one that ended meanwhile, and never applies twice", func() {
		const ns = "crash"
		createNamespace(shared, ns)
		// long's apply outlives the manager's downtime; short's ends while the manager is down.
		applyFixture(shared, ns, "cluster.yaml", "long", 25)
		applyFixture(shared, ns, "cluster.yaml", "short", 4)
		longJob := eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, "long", infrav1.OperationApply)
		shortJob := eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, "short", infrav1.OperationApply)

		By("SIGKILL, as a crash or an OOM kill would")
		mgr := shared.Manager()
		starts := mgr.Starts()
		Expect(mgr.Kill()).To(Succeed())
		killed := time.Now()
		Expect(mgr.Running()).To(BeFalse())

		By("the Jobs do not depend on the manager: short ends while it is down")
		eventuallyFinished(shared, shortJob)
		Expect(ranToEnd(longJob)).To(BeFalse(), "long must still run when the manager comes back")

		By("restart")
		Expect(mgr.Start(ctx)).To(Succeed())
		AddReportEntry("manager down (SIGKILL to ready again)", since(killed))
		Expect(mgr.Starts()).To(Equal(starts + 1))

		eventuallyReady(shared, tc(ns, "short"), tc(ns, "long"))
		for _, name := range []string{"long", "short"} {
			Expect(jobsOf(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)).To(HaveLen(1), "one apply Job for %s", name)
			Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)).To(HaveLen(1), "one apply run for %s", name)
			o := tc(ns, name)
			Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			Expect(o.Status.LastRun).NotTo(BeNil())
			Expect(o.Status.LastRun.Outcome).To(Equal(infrav1.RunSucceeded))
			Expect(o.Status.ActiveJob).To(BeNil())
		}
		Expect(captfLeases(shared, ns)).To(BeEmpty(), "the leases of both Jobs were released")
		Consistently(func() int {
			return len(jobsOf(shared, infrav1.TerraformClusterKind, ns, "long", "")) + len(jobsOf(shared, infrav1.TerraformClusterKind, ns, "short", ""))
		}, 3*time.Second).Should(Equal(2))
		for _, r := range runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, "long", "") {
			Expect(r.Phase).To(Equal(corev1.PodSucceeded))
		}
	})
})

// ranToEnd reports whether the shared sandbox's executor has run a Job's Pod to its end.
func ranToEnd(job interface{ GetName() string }) bool {
	for _, r := range shared.Executor().Runs() {
		if r.Job == job.GetName() {
			return true
		}
	}
	return false
}
