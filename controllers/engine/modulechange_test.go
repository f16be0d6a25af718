package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// durableVariables reads the variables of the object's durable inputs Secret (those of its last
// Job that assembled them).
func durableVariables(o *infrav1.TerraformCluster) []byte {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: o.Namespace,
		Name: naming.InputsSecretName(suffixOf(o, infrav1.TerraformClusterKind))}, s)).To(Succeed())
	return s.Data[inputs.VariablesKey]
}

var _ = Describe("A change of spec.module", func() {
	It("alone applies the new module once, as a change of the variables does", func() {
		f := newFixture()
		tc := f.provisionCluster()
		first := get(tc).Annotations[infrav1.AppliedHashAnnotation]

		By("another ConfigMap, the variables unchanged: one apply with a new inputs hash")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module-v2"}}
		})
		job := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(job.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(job.Annotations[infrav1.InputsHashAnnotation]).NotTo(Equal(first))
		st := clusterState(2, "10.1.0.1")
		completeJob(job, st, true, "")
		Eventually(func() string { return get(tc).Annotations[infrav1.AppliedHashAnnotation] }).Should(
			Equal(job.Annotations[infrav1.InputsHashAnnotation]))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(3), "applied: nothing runs again")

		By("a path in the module's source is another module too")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Module.Path = "network" })
		Expect(waitForJob(tc, infrav1.TerraformClusterKind, 3).Labels).To(
			HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
	})

	It("under Manual is planned and waits for approval", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) { s.ApplyPolicy = infrav1.ApplyPolicyManual }).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.13.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module-v2"}}
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		id := completePlan(plan, 1, runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.network"}})
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(HaveField("ID", id))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(3), "the plan waits: no apply")
	})
})

var _ = Describe("An applied hash of the earlier inputs scheme (a manager before the module was hashed)", func() {
	It("is taken over without an apply when the variables did not change, and applies when they did", func() {
		f := newFixture()
		tc := f.provisionCluster()
		current := get(tc).Annotations[infrav1.AppliedHashAnnotation]
		Expect(inputs.IsLegacyHash(current)).To(BeFalse())
		legacy := inputs.LegacyHash(durableVariables(tc))

		By("the earlier manager's hash of the same variables, the manager's memo of the hash fresh: rewritten as this scheme's, no Job")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.AppliedHashAnnotation] = legacy })
		kit.Poke(tc)
		Eventually(func() string { return get(tc).Annotations[infrav1.AppliedHashAnnotation] }).Should(Equal(current))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(2), "taken over: nothing runs")

		By("the same past the memo's TTL, where status.inputs stands for it (a manager that just started): taken over, no Job")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.AppliedHashAnnotation] = legacy })
		pastInputsTTL()
		kit.Poke(tc)
		Eventually(func() string { return get(tc).Annotations[infrav1.AppliedHashAnnotation] }).Should(Equal(current))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(2), "taken over: nothing runs")

		By("the earlier manager's hash of other variables: the variables changed since, one apply")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Annotations[infrav1.AppliedHashAnnotation] = inputs.LegacyHash([]byte(`{"captf":{},"size":0}`))
		})
		kit.Poke(tc)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(job.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(job.Annotations[infrav1.InputsHashAnnotation]).To(Equal(current))
	})
})
