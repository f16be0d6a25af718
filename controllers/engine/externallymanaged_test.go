package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("An externally managed cluster (cluster.x-k8s.io/managed-by)", func() {
	It("is left alone: no finalizer, no Job, no status, no Lease; once the mark is gone CAPTF takes it over", func() {
		f := newFixture()
		tc := f.terraformCluster().Obj()
		tc.Annotations = map[string]string{infrav1.ManagedByAnnotation: "another-tool"}
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("marked: nothing is written, on the object or beside it")
		Consistently(func(g Gomega) {
			o := get(tc)
			g.Expect(o.Finalizers).To(BeEmpty())
			g.Expect(o.Status.Conditions).To(BeEmpty())
			g.Expect(o.Annotations).To(HaveLen(1), "only the mark: no run sequence, no block-move")
			g.Expect(kit.JobsOf(o, infrav1.TerraformClusterKind)).To(BeEmpty())
			g.Expect(leasesOf(f.ns)).To(BeEmpty())
		}, "3s").Should(Succeed())

		By("the mark removed: the finalizer, then the first apply")
		update(tc, func(tc *infrav1.TerraformCluster) { delete(tc.Annotations, infrav1.ManagedByAnnotation) })
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(operationOf(job)).To(Equal(infrav1.OperationApply))
		Expect(get(tc).Finalizers).To(ContainElement(infrav1.Finalizer))
	})
})
