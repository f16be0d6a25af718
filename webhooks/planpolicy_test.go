package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("Plan policies", func() {
	It("refuses a plan policy whose rule does not compile, is not a bool, or costs over the limit, and admits the documented ones", func() {
		policy := func(name string, rules ...infrav1.PlanPolicyRule) *infrav1.TerraformPlanPolicy {
			return &infrav1.TerraformPlanPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.TerraformPlanPolicySpec{Rules: rules}}
		}
		good := policy(fmt.Sprintf("good-%d", GinkgoParallelProcess()),
			infrav1.PlanPolicyRule{Name: "no-db-deletes", Expression: `changes.all(c, !(c.type == 'aws_db_instance' && c.action in ['delete', 'replace']))`},
			infrav1.PlanPolicyRule{Name: "at-most-ten", Expression: `summary.total <= 10`})
		good.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		Expect(admin.Create(ctx, good)).To(Succeed())
		DeferCleanup(func() { Expect(admin.Delete(ctx, good)).To(Succeed()) })

		for _, tc := range []struct{ expr, want string }{
			{`changes.all(c, c.type ==`, "compile"},
			{`summary.total`, "returns int; a rule returns a bool"},
			{`changes.all(a, changes.all(b, a.address != b.address || a == b))`, "exceeds the limit of 1000000 per evaluation"},
		} {
			bad := policy("bad", infrav1.PlanPolicyRule{Name: "r", Expression: tc.expr})
			err := admin.Create(ctx, bad)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.expr, err)
			Expect(err.Error()).To(ContainSubstring(`admission webhook "validate.terraformplanpolicy.captf.io" denied the request`))
			Expect(err.Error()).To(ContainSubstring("spec.rules[0].expression"))
			Expect(err.Error()).To(ContainSubstring(tc.want))
		}

		By("an update that breaks a rule is refused too")
		edited := good.DeepCopy()
		edited.Spec.Rules[1].Expression = `summary.total <=`
		err := admin.Update(ctx, edited)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.rules[1].expression"))
	})
})
