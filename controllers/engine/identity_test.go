package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The identity token audience, before every Job", func() {
	It("holds an object whose identity token audience the API server accepts, with a reason and one event, and runs once it is a cloud audience", func() {
		// The suite runs no webhook: this is the engine's own line, which also catches an
		// audience the API server began to accept after admission.
		probe := types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: jobs.DefaultAudienceProbeAccountName}
		Expect(jobs.EnsureAudienceProbeAccount(ctx, k8s, k8s, probe)).To(Succeed())
		auds, err := envtest.APIServerAudiences(ctx, k8s, probe)
		Expect(err).NotTo(HaveOccurred())

		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.IdentityToken = &infrav1.IdentityToken{Audience: auds[0]}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }

		By("InputsValid=False, IdentityAudienceRefused, naming the audience; no Job")
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.IdentityAudienceRefusedReason), HaveField("Message", ContainSubstring(auds[0]))))
		kit.Poke(tc)
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeZero())

		By("one Warning event for the transition, not one per pass")
		Eventually(func() int { return warningEvents(f.ns, tc.Name, infrav1.IdentityAudienceRefusedReason) }).Should(Equal(1))

		By("a cloud audience: the apply runs with a token of that audience")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Job.IdentityToken.Audience = "sts.amazonaws.com" })
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		var audiences []string
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience != "" {
					audiences = append(audiences, s.ServiceAccountToken.Audience)
				}
			}
		}
		Expect(audiences).To(ConsistOf("sts.amazonaws.com"))
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(warningEvents(f.ns, tc.Name, infrav1.IdentityAudienceRefusedReason)).To(Equal(1))
	})
})
