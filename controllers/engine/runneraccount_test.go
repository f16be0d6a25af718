package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("A ServiceAccount named for the Jobs", func() {
	It("runs nothing until it exists and carries captf.io/runner=true, then runs the Jobs under it", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.ServiceAccountName = "team-runner"
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }

		By("missing: InputsValid=False, RunnerAccountMissing, no Job")
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.RunnerAccountMissingReason)))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(BeEmpty())

		By("present without the label: RunnerAccountNotOptedIn, naming the command, still no Job")
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "team-runner"}}
		Expect(k8s.Create(ctx, sa)).To(Succeed())
		kit.Poke(tc)
		Eventually(inputsValid).Should(And(HaveField("Reason", infrav1.RunnerAccountNotOptedInReason),
			HaveField("Message", ContainSubstring("kubectl label serviceaccount team-runner -n "+f.ns+" captf.io/runner=true"))))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeZero())

		By("labelled: the apply runs under it, and the runner's Role is bound to it")
		update(sa, func(sa *corev1.ServiceAccount) { sa.Labels = map[string]string{infrav1.RunnerAccountLabel: "true"} })
		kit.Poke(tc)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(job.Spec.Template.Spec.ServiceAccountName).To(Equal("team-runner"))
		rb := &rbacv1.RoleBinding{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunnerServiceAccountName(suffixOf(tc, infrav1.TerraformClusterKind))}, rb)).To(Succeed())
		Expect(rb.Subjects).To(ConsistOf(HaveField("Name", "team-runner")))
		// The Job is created before the pass's one status patch lands.
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))
	})
})
