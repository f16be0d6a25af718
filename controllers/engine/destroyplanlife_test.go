package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// A destroy judged like an apply (docs/deletion.md): a deleting object that asks for its plans
// to be judged destroys only through a saved destroy plan that passed or that an approver
// approved; the finalizer stays while it waits.
var _ = Describe("A destroy judged like an apply", func() {
	// provisioned creates a TerraformCluster of f with spec changes and applies it once.
	provisioned := func(f *fixture, change func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
		GinkgoHelper()
		tc := f.terraformCluster().Obj()
		change(tc)
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		first := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(first.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		completeJob(first, clusterState(1, "10.11.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		return tc
	}
	// destroyPlanJob waits for the Job of seq and checks it makes a destroy plan.
	destroyPlanJob := func(tc *infrav1.TerraformCluster, seq int64) string {
		GinkgoHelper()
		plan := waitForJob(tc, infrav1.TerraformClusterKind, seq)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		Expect(plan.Annotations).To(HaveKeyWithValue(infrav1.DestroyPlanAnnotation, "true"))
		Expect(plan.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--"+runnerapi.FlagDestroyPlan+"=true"), "the runner plans -destroy")
		Expect(plan.Spec.Template.Spec.InitContainers[1].Command).To(ContainElement("--"+runnerapi.FlagDestroyPlan+"=true"), "the channel records a destroy plan")
		return plan.Name
	}

	It("under Manual: the deletion makes a destroy plan, waits for an approver with the finalizer kept, and the approved plan is what the Destroy Job applies", func() {
		f := newFixture()
		tc := provisioned(f, func(tc *infrav1.TerraformCluster) { tc.Spec.ApplyPolicy = infrav1.ApplyPolicyManual })

		By("deleting: a Plan Job makes the destroy plan; nothing is destroyed")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		name := destroyPlanJob(tc, 2)
		// The recorder writes events asynchronously: the Job can be seen before its event.
		Eventually(func() []eventsv1.Event { return normals(f.ns, tc.Name, "DestroyPlanStarted") }).ShouldNot(BeEmpty())
		Eventually(func() string { return envtest.Condition(get(tc), infrav1.DeletingCondition).Message }).Should(
			ContainSubstring("Job "+name+" makes the destroy plan"), "Deleting says what runs, as docs/deletion.md shows")
		deleteJSON, deleteSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete", "terraform_data.network terraform_data delete")
		id := completeSavedPlan(waitForJob(tc, infrav1.TerraformClusterKind, 2), 1, deleteSum, false, deleteJSON)

		By("the destroy plan waits for an approver: Deleting says how, the event names it, the finalizer stays")
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", id), HaveField("Destroy", true), HaveField("Delete", int32(2)), HaveField("Job", name)))
		cond := envtest.Condition(tc, infrav1.DeletingCondition)
		Expect(cond).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.PlanAwaitingApprovalReason)))
		Expect(cond.Message).To(ContainSubstring(infrav1.ApprovePlanAnnotation + "=" + id))
		Expect(cond.Message).To(ContainSubstring("destroy plan"))
		Eventually(func() []string { return notesOf(normals(f.ns, tc.Name, "PlanSaved")) }).Should(ContainElement(ContainSubstring("destroy plan")))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(3), "the waiting destroy plan destroys nothing")
		Expect(get(tc).Finalizers).To(ContainElement(infrav1.Finalizer))

		By("an approval of the plan: a Destroy Job applies exactly that plan, and the object goes")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		Expect(destroy.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, id))
		Expect(destroy.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--plan-id=" + id))
		Expect(jobs.StateLineageOf(destroy)).To(Equal(statetest.DefaultLineage))
		empty := statetest.Destroyed()
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
	})

	It("holds as corrupt a destroy plan whose record records another kind than its Job made", func() {
		f := newFixture()
		tc := provisioned(f, func(tc *infrav1.TerraformCluster) { tc.Spec.ApplyPolicy = infrav1.ApplyPolicyManual })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroyPlanJob(tc, 2)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 2)

		By("the plan Secret's record says an apply plan (the channel never writes that for this Job)")
		asApply := job.DeepCopy()
		delete(asApply.Annotations, infrav1.DestroyPlanAnnotation)
		deleteJSON, deleteSum := jsonPlanOf("terraform_data.network terraform_data delete")
		id, digests := storeSavedPlan(asApply, 1, deleteSum, false, deleteJSON)
		finishPlanJob(job, id, deleteSum, digests)
		Eventually(func() string { return envtest.Condition(get(tc), infrav1.DeletingCondition).Reason }).Should(Equal(infrav1.PlanCorruptReason))
		Expect(envtest.Condition(tc, infrav1.DeletingCondition).Message).To(ContainSubstring("records a plan, but Job " + job.Name + " made a destroy plan"))
		Expect(envtest.Condition(tc, infrav1.DeletingCondition).Message).To(ContainSubstring(infrav1.DestroyWithoutPlanAnnotation))

		By("an approval of it destroys nothing")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(3), "a corrupt destroy plan is never applied")
	})

	It("under a plan policy: a destroy plan that breaks a rule holds the deletion after the policy is gone; the override groups' break-glass destroys without it", func() {
		f := newFixture()
		nsObj := &corev1.Namespace{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: f.ns}, nsObj)).To(Succeed())
		nsObj.Labels = map[string]string{"captf-test-policy": f.ns}
		Expect(k8s.Update(ctx, nsObj)).To(Succeed())
		pol := &infrav1.TerraformPlanPolicy{ObjectMeta: metav1.ObjectMeta{Name: "destroys-" + f.ns}, Spec: infrav1.TerraformPlanPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf-test-policy": f.ns}},
			Rules: []infrav1.PlanPolicyRule{{Name: "no-db-deletes", Message: "databases are never deleted by a plan",
				Expression: `changes.all(c, !(c.type == 'aws_db_instance' && c.action in ['delete', 'replace']))`}},
		}}
		Expect(k8s.Create(ctx, pol)).To(Succeed())
		tc := f.terraformCluster().Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		createJSON, createSum := jsonPlanOf("aws_db_instance.main aws_db_instance create")
		created := completeSavedPlan(waitForJob(tc, infrav1.TerraformClusterKind, 1), 0, createSum, false, createJSON)
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, created))
		completeJob(apply, clusterState(1, "10.11.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("deleting: the destroy plan deletes the database, breaks the rule and holds the deletion")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroyPlanJob(tc, 3)
		deleteJSON, deleteSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete")
		held := completeSavedPlan(waitForJob(tc, infrav1.TerraformClusterKind, 3), 1, deleteSum, false, deleteJSON)
		want := "destroys-" + f.ns + "/no-db-deletes: databases are never deleted by a plan"
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", held), HaveField("Destroy", true), HaveField("Violations", ConsistOf(want))))
		Eventually(func() string { return envtest.Condition(get(tc), infrav1.DeletingCondition).Reason }).Should(Equal(infrav1.PlanPolicyViolatedReason))
		Expect(envtest.Condition(tc, infrav1.DeletingCondition).Message).To(ContainSubstring(want))
		Eventually(func() []string { return notesOf(warnings(f.ns, tc.Name, infrav1.PlanPolicyViolatedReason)) }).Should(ContainElement(ContainSubstring(want)))

		By("the policy is deleted: the verdict stays with the destroy plan, nothing is destroyed")
		Expect(k8s.Delete(ctx, pol)).To(Succeed())
		kit.Poke(tc)
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "3s").Should(BeEquivalentTo(4), "the held destroy plan destroys nothing")
		Expect(envtest.Condition(tc, infrav1.DeletingCondition).Reason).To(Equal(infrav1.PlanPolicyViolatedReason))

		By("an override group member's break-glass annotation: a Destroy Job without a plan, with a Warning event")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Annotations[infrav1.DestroyWithoutPlanAnnotation] = string(tc.UID)
		})
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		Expect(destroy.Annotations).NotTo(HaveKey(infrav1.PlanIDAnnotation))
		Eventually(func() []string { return notesOf(warnings(f.ns, tc.Name, "DestroyWithoutPlan")) }).Should(ContainElement(ContainSubstring(infrav1.DestroyWithoutPlanAnnotation)))
		empty := statetest.Destroyed()
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
	})
})

// notesOf lists the notes of events.
func notesOf(events []eventsv1.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Note)
	}
	return out
}
