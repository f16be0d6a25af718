package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// jsonPlanOf is a JSON plan listing the changes ("address type action") and their summary.
func jsonPlanOf(changes ...string) (string, runnerapi.PlanSummary) {
	var sum runnerapi.PlanSummary
	var entries []string
	for _, c := range changes {
		f := strings.Fields(c)
		actions := []string{f[2]}
		if f[2] == runnerapi.ActionReplace {
			actions = []string{"delete", "create"}
		}
		sum.Add(f[0], actions)
		a, _ := json.Marshal(actions)
		entries = append(entries, fmt.Sprintf(`{"address":%q,"mode":"managed","type":%q,"change":{"actions":%s}}`, f[0], f[1], a))
	}
	return `{"format_version":"1.2","resource_changes":[` + strings.Join(entries, ",") + `]}`, sum
}

var _ = Describe("Plan policies", func() {
	It("a plan policy holds a plan that deletes a database and lets a create-only plan apply", func() {
		f := newFixture()
		By("a policy selecting this fixture's namespace by a label")
		nsObj := &corev1.Namespace{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: f.ns}, nsObj)).To(Succeed())
		nsObj.Labels = map[string]string{"captf-test-policy": f.ns}
		Expect(k8s.Update(ctx, nsObj)).To(Succeed())
		pol := &infrav1.TerraformPlanPolicy{ObjectMeta: metav1.ObjectMeta{Name: "databases-" + f.ns}, Spec: infrav1.TerraformPlanPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf-test-policy": f.ns}},
			Rules: []infrav1.PlanPolicyRule{{Name: "no-db-deletes", Message: "databases are never deleted by a plan",
				Expression: `changes.all(c, !(c.type == 'aws_db_instance' && c.action in ['delete', 'replace']))`}},
		}}
		Expect(k8s.Create(ctx, pol)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, pol)).To(Succeed()) })

		tc := f.terraformCluster().Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("the first apply goes through a plan, and a create-only plan applies at once, from its saved plan")
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		createJSON, createSum := jsonPlanOf("aws_db_instance.main aws_db_instance create", "terraform_data.network terraform_data create")
		created := completeSavedPlan(plan, 0, createSum, false, createJSON)
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, created), "exactly the judged plan applies")
		completeJob(apply, clusterState(1, "10.11.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("a plan that deletes the database is held, with the rule's message, and nothing applies")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		plan = waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		deleteJSON, deleteSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete", "terraform_data.network terraform_data update")
		held := completeSavedPlan(plan, 1, deleteSum, false, deleteJSON)
		want := "databases-" + f.ns + "/no-db-deletes: databases are never deleted by a plan"
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", held), HaveField("Reason", infrav1.PlanWaitPolicyViolated), HaveField("Violations", ConsistOf(want))))
		cond := envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)
		Expect(cond).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.PlanPolicyViolatedReason)))
		Expect(cond.Message).To(ContainSubstring(want))
		Expect(cond.Message).To(ContainSubstring(infrav1.ApprovePlanAnnotation + "=" + held))
		Eventually(func() []string {
			var msgs []string
			for _, e := range warnings(f.ns, tc.Name, infrav1.PlanPolicyViolatedReason) {
				msgs = append(msgs, e.Note)
			}
			return msgs
		}).Should(ContainElement(ContainSubstring(want)))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(4), "the held plan applies nothing")

		By("an approver's approval applies the held plan, once")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = held })
		apply = waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, held))
		completeJob(apply, clusterState(2, "10.11.0.1"), true, "")
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(BeNil())
	})
})
