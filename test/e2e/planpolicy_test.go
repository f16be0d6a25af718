package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

var _ = Describe(doccmd.SpecPlanPolicy, func() {
	It("a policy vetoes plans that replace or delete a named type, lets a create-only plan apply, and refuses rules that cannot run", func() {
		const ns, name, label = "plans-policy", "pp", "pp"
		sb := shared
		createNamespace(sb, ns)
		kubectl(sb, "label", "namespace", ns, "captf-e2e-policy="+label)

		By("kubectl apply of the policy (cluster-scoped), as docs/plans.md shows")
		raw, err := os.ReadFile(filepath.Join("testdata", "planpolicy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(GinkgoT().TempDir(), "policy.yaml")
		Expect(os.WriteFile(f, []byte(strings.ReplaceAll(string(raw), "LABEL", label)), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-f", f)
		DeferCleanup(func() { kubectl(sb, "delete", "terraformplanpolicy", "e2e-"+label) })

		By("a rule that does not compile, or costs over the limit, is refused at admission with the reason")
		for expr, want := range map[string]string{
			`changes.all(c, c.type ==`: "compile: ERROR",
			`changes.all(a, changes.all(b, a.address != b.address || a == b))`: "exceeds the limit of 1000000 per evaluation",
		} {
			bad := strings.ReplaceAll(strings.ReplaceAll(string(raw), "LABEL", "bad"), `"summary.total <= 10"`, "'"+strings.ReplaceAll(expr, "'", "''")+"'")
			bad = strings.Replace(bad, "  - name: no-data-deletes\n    expression: \"changes.all(c, !(c.type == 'terraform_data' && c.action in ['delete', 'replace']))\"\n    message: terraform_data is never deleted or replaced by a plan; ask an approver\n", "", 1)
			bf := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
			Expect(os.WriteFile(bf, []byte(bad), 0o600)).To(Succeed())
			out, err := run(sb.Kubeconfig(), "kubectl", "apply", "-f", bf)
			Expect(err).To(HaveOccurred(), "%s was admitted:\n%s", expr, bad)
			// kubectl apply prints the webhook's Invalid status as docs/plans.md shows it.
			Expect(out).To(ContainSubstring(`The TerraformPlanPolicy "e2e-bad" is invalid: spec.rules[0].expression: Invalid value`))
			Expect(out).To(ContainSubstring(want))
			AddReportEntry("refused plan policy", strings.TrimSpace(out))
		}

		By("the first apply of a selected object goes through a plan; a create-only plan applies at once")
		planFixture(sb, ns, name, "applyPolicy: Automatic")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		Expect(countRuns(sb, ns, name, infrav1.OperationPlan)).To(Equal(1), "the first apply was planned and judged")
		first := o.Annotations[infrav1.AppliedPlanAnnotation]
		Expect(first).NotTo(BeEmpty(), "the first apply applied its saved plan")
		Expect(applyJobOf(sb, ns, name, first).Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, first))
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation), "nobody approved it")

		By("a plan that replaces terraform_data.node is held, with the rule's message")
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		var p *infrav1.PendingPlan
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			p = o.Status.PendingPlan
			g.Expect(p).NotTo(BeNil())
			c := meta.FindStatusCondition(o.Status.Conditions, infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.PlanPolicyViolatedReason), "%s: %s", c.Reason, c.Message)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
		want := "e2e-" + label + "/no-data-deletes: terraform_data is never deleted or replaced by a plan; ask an approver"
		Expect(p.Reason).To(Equal(infrav1.PlanWaitPolicyViolated))
		Expect(p.Violations).To(ConsistOf(want))
		// docs/plans.md's command, on this spec's object.
		Expect(newDocShell(GinkgoT().TempDir(), "KUBECONFIG="+sb.Kubeconfig(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH")).ok("docs/plans.md",
			"kubectl -n prod get terraformcluster prod -o jsonpath='{.status.pendingPlan.violations}'", "-n prod", "-n "+ns, "terraformcluster prod", "terraformcluster "+name)).To(ContainSubstring("no-data-deletes"))
		Expect(kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason=PlanPolicyViolated")).To(ContainSubstring("no-data-deletes"))
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 3*time.Second).Should(Equal(applies), "the held plan applies nothing")
		Expect(nodeGeneration(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(Equal(float64(1)))

		By("the JSON plan the policy judged lists the replace")
		var doc struct {
			ResourceChanges []struct {
				Address string `json:"address"`
				Change  struct {
					Actions []string `json:"actions"`
				} `json:"change"`
			} `json:"resource_changes"`
		}
		Expect(json.Unmarshal([]byte(shell(sb, "kubectl -n "+ns+" get secret "+p.Secret+` -o jsonpath='{.data.plan\.json}' | base64 -d`)), &doc)).To(Succeed())
		actions := map[string][]string{}
		for _, c := range doc.ResourceChanges {
			actions[c.Address] = c.Change.Actions
		}
		Expect(actions).To(HaveKeyWithValue("terraform_data.node", ConsistOf(runnerapi.ActionDelete, runnerapi.ActionCreate)))
		Expect(actions).To(HaveKeyWithValue("terraform_data.extra[0]", []string{runnerapi.ActionCreate}))

		By("an approver applies the held plan, exactly it, once")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p.ID)
		Expect(eventuallyFinished(sb, applyJobOf(sb, ns, name, p.ID)).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p.ID))
			g.Expect(o.Status.PendingPlan).To(BeNil())
		}).Should(Succeed())
		eventuallyReady(sb, o)
		Expect(nodeGeneration(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(Equal(float64(2)))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 1))

		By("a plan that only deletes terraform_data.extra[0] is held too")
		setVariables(sb, ns, name, `{"generation":2,"extra":0}`)
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Status.PendingPlan).NotTo(BeNil())
			g.Expect(o.Status.PendingPlan.ID).NotTo(Equal(p.ID))
			g.Expect(o.Status.PendingPlan).To(And(HaveField("Delete", int32(1)), HaveField("Create", int32(0)), HaveField("Replace", int32(0)),
				HaveField("Reason", infrav1.PlanWaitPolicyViolated), HaveField("Violations", ConsistOf(want))))
		}).Should(Succeed())
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 3*time.Second).Should(Equal(applies+1), "the delete applies nothing")
		Expect(addresses(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(ContainElement("terraform_data.extra[0]"))
	})
})
