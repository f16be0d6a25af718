package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// T31 and T32 of docs/threat-model.md: a tenant's delete of an object whose changes are judged
// runs no destroy that nobody judged (docs/deletion.md, "A destroy judged like an apply"), with
// real terraform on the sandbox, whose manager runs with system:masters as both the approver and
// the override group.
var _ = Describe("A tenant deleting judged objects", func() {
	// deletingWaits waits until the deleting object's destroy plan waits for a person with
	// reason, and returns that plan.
	deletingWaits := func(o *infrav1.TerraformCluster, reason string) *infrav1.PendingPlan {
		GinkgoHelper()
		var p *infrav1.PendingPlan
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			p = o.Status.PendingPlan
			g.Expect(p).NotTo(BeNil(), "no destroy plan waits yet")
			g.Expect(p.Destroy).To(BeTrue(), "the pending plan %s is not a destroy plan", p.ID)
			c := meta.FindStatusCondition(o.Status.Conditions, infrav1.DeletingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(reason), "%s: %s", c.Reason, c.Message)
			g.Expect(c.Message).To(ContainSubstring(p.ID))
		}).Should(Succeed())
		Expect(o.Finalizers).To(ContainElement(infrav1.Finalizer), "the finalizer stays while the destroy plan waits")
		// terraform_data.network and terraform_data.node: the destroy plan deletes both.
		Expect(p.Delete).To(Equal(int32(2)), "the destroy plan deletes what the state tracks")
		return p
	}
	gone := func(o *infrav1.TerraformCluster) {
		GinkgoHelper()
		Eventually(func() bool {
			return apierrors.IsNotFound(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}))
		}, 3*time.Minute).Should(BeTrue())
	}

	It("deletes a Manual and a policy-selected object: each destroy waits on a destroy plan the tenant cannot approve or skip", func() {
		sb := shared
		manual := asTenant(sb, "tenant-destroy")
		selected := asTenant(sb, "tenant-destroy-policy")
		mo, so := tc(manual.Namespace, "tdm"), tc(selected.Namespace, "tds")

		By("a plan policy that forbids deleting terraform_data selects the second namespace")
		kubectl(sb, "label", "namespace", selected.Namespace, "captf-e2e-policy=tds")
		raw, err := os.ReadFile(filepath.Join("testdata", "planpolicy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(GinkgoT().TempDir(), "policy.yaml")
		Expect(os.WriteFile(f, []byte(strings.ReplaceAll(string(raw), "LABEL", "tds")), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-f", f)
		DeferCleanup(func() { kubectl(sb, "delete", "--ignore-not-found", "terraformplanpolicy", "e2e-tds") })

		By("both objects apply: the Manual one at once (its first apply), the selected one through a create-only plan")
		planFixture(sb, mo.Namespace, mo.Name, "applyPolicy: Manual")
		planFixture(sb, so.Namespace, so.Name, "applyPolicy: Automatic")
		eventuallyReady(sb, mo, so)

		By("the tenant deletes both with kubectl; each makes a destroy plan and destroys nothing")
		manual.MustKubectl("delete", "terraformcluster", mo.Name, "--wait=false")
		selected.MustKubectl("delete", "terraformcluster", so.Name, "--wait=false")
		mp := deletingWaits(mo, infrav1.PlanAwaitingApprovalReason)
		sp := deletingWaits(so, infrav1.PlanPolicyViolatedReason)
		Expect(sp.Violations).To(ConsistOf("e2e-tds/no-data-deletes: terraform_data is never deleted or replaced by a plan; ask an approver"))
		Expect(countRuns(sb, mo.Namespace, mo.Name, infrav1.OperationDestroy)).To(BeZero())
		Expect(countRuns(sb, so.Namespace, so.Name, infrav1.OperationDestroy)).To(BeZero())
		Expect(kubectl(sb, "get", "-n", mo.Namespace, "events", "--field-selector", "reason=DestroyPlanStarted,involvedObject.name="+mo.Name)).To(ContainSubstring("makes the destroy plan"))
		show := captfOK(sb, mo.Namespace, "plan", "show", "terraformcluster/"+mo.Name)
		Expect(show).To(And(ContainSubstring("destroy plan (the object is being deleted"), ContainSubstring(mp.ID), ContainSubstring("delete 2")))
		AddReportEntry("the approver's view of a destroy plan", show)

		By("the tenant cannot approve the destroy plan, nor skip it with the break-glass annotation")
		out, err := manual.Kubectl("annotate", "terraformcluster", mo.Name, infrav1.ApprovePlanAnnotation+"="+mp.ID)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(manual.User + " may not set captf.io/approve-plan"))
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(so), so)).To(Succeed())
		out, err = selected.Kubectl("annotate", "terraformcluster", so.Name, infrav1.DestroyWithoutPlanAnnotation+"="+string(so.UID))
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("only members of the override groups may (groups system:masters)"))
		AddReportEntry("a tenant's break-glass destroy", strings.TrimSpace(out))

		By("the policy is deleted: the verdict stays with the destroy plan")
		kubectl(sb, "delete", "terraformplanpolicy", "e2e-tds")
		Consistently(func() int { return countRuns(sb, so.Namespace, so.Name, infrav1.OperationDestroy) }, 5*time.Second).Should(BeZero(),
			"a held destroy plan destroys nothing after the policy is gone")
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(so), so)).To(Succeed())
		Expect(meta.FindStatusCondition(so.Status.Conditions, infrav1.DeletingCondition).Reason).To(Equal(infrav1.PlanPolicyViolatedReason))

		By("an approver approves the Manual object's destroy plan with kubectl captf approve: a Destroy Job applies exactly it, and the object goes")
		captfOK(sb, mo.Namespace, "approve", "terraformcluster/"+mo.Name, "--yes")
		Eventually(func(g Gomega) {
			destroys := jobsOf(sb, infrav1.TerraformClusterKind, mo.Namespace, mo.Name, infrav1.OperationDestroy)
			g.Expect(destroys).To(HaveLen(1))
			g.Expect(destroys[0].Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, mp.ID))
		}).Should(Succeed())
		gone(mo)
		Expect(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, mo.Namespace, mo.Name, infrav1.OperationDestroy)).To(HaveLen(1))

		By("an override group member's break-glass annotation destroys the held object without its plan, with a Warning event")
		kubectl(sb, "annotate", "-n", so.Namespace, "terraformcluster", so.Name, infrav1.DestroyWithoutPlanAnnotation+"="+string(so.UID))
		Eventually(func() string {
			return kubectl(sb, "get", "-n", so.Namespace, "events", "--field-selector", "reason=DestroyWithoutPlan,involvedObject.name="+so.Name)
		}).Should(ContainSubstring(infrav1.DestroyWithoutPlanAnnotation))
		gone(so)
		Expect(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, so.Namespace, so.Name, infrav1.OperationDestroy)).To(HaveLen(1))
	})

	// T34: the finalizer of an object that may own infrastructure.
	It("pauses its applied object, deletes it and removes the finalizer while nothing runs: refused, and once unpaused the destroy runs", func() {
		sb := shared
		t := asTenant(sb, "tenant-finalizer")
		o := tc(t.Namespace, "tf")
		planFixture(sb, o.Namespace, o.Name, "applyPolicy: Automatic")
		eventuallyReady(sb, o)

		By("the tenant pauses it and deletes it: the deletion waits, nothing runs")
		t.MustKubectl("annotate", "terraformcluster", o.Name, infrav1.PausedAnnotation+"=")
		t.MustKubectl("delete", "terraformcluster", o.Name, "--wait=false")
		Eventually(func() string {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			if c := meta.FindStatusCondition(o.Status.Conditions, infrav1.DeletingCondition); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(infrav1.PausedReason))

		By("the tenant removes the finalizer with a JSON patch: refused, with what to do")
		out, err := t.Kubectl("patch", "terraformcluster", o.Name, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("may have made infrastructure that no destroy removed"), ContainSubstring("spec.deletionPolicy: Retain")))
		AddReportEntry("T34: the tenant removes the finalizer of its paused, deleted object", strings.TrimSpace(out))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Finalizers).To(ContainElement(infrav1.Finalizer))

		By("unpaused, the destroy runs and the object goes")
		t.MustKubectl("annotate", "terraformcluster", o.Name, infrav1.PausedAnnotation+"-")
		gone(o)
		Expect(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, o.Namespace, o.Name, infrav1.OperationDestroy)).To(HaveLen(1))
	})
})
