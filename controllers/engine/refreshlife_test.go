package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// operationOf is a Job's operation label.
func operationOf(job *batchv1.Job) infrav1.Operation {
	return infrav1.Operation(job.Labels[infrav1.OperationLabel])
}

var _ = Describe("Refresh", func() {
	It("accepts drift with one refresh: a refresh-only check, a Refresh Job that writes the state and is backed up, no apply", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: time.Minute}, Mode: infrav1.DriftModeAccept}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.12.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("under Accept the check is a refresh-only plan: it compares the infrastructure with the state")
		drift := nextDrift(tc, 2)
		Expect(drift.Annotations).To(HaveKeyWithValue(infrav1.RefreshOnlyAnnotation, "true"))
		Expect(drift.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--" + runnerapi.FlagRefreshOnly + "=true"))
		completeDrift(drift, true)
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftDetectedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("mode Accept"))))

		By("one Refresh Job follows; it takes the cluster lease like any state writer")
		refresh := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(operationOf(refresh)).To(Equal(infrav1.OperationRefresh))
		Expect(refresh.Annotations).NotTo(HaveKey(runnerapi.PlanIDAnnotation))
		Expect(leasesOf(f.ns)).To(ContainElement(HaveField("ObjectMeta.Labels", HaveKeyWithValue(infrav1.LeaseLabel, infrav1.LeaseKindCluster))),
			"a refresh writes the state: the operation gate holds the cluster's machines off")
		completeJob(refresh, clusterState(2, "10.12.0.1"), true, "")

		By("the drift is accepted: DriftDetected False (Accepted), the state backed up, nothing applied")
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftDetectedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.AcceptedReason)))
		Expect(tc.Annotations).NotTo(HaveKey(infrav1.RemediateAnnotation))
		Expect(envtest.Condition(tc, infrav1.DriftJobSucceededCondition)).To(HaveField("Status", metav1.ConditionTrue))
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(ContainElement(HaveField("Serial", int64(2))))
		Eventually(func() []string {
			list := &eventsv1.EventList{}
			Expect(k8s.List(ctx, list, client.InNamespace(f.ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Reason == "StateRefreshed" && e.Regarding.Name == tc.Name && e.Type == corev1.EventTypeNormal {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}).Should(ConsistOf(ContainSubstring("Job " + refresh.Name + " recorded in the state what changed outside Terraform")))
		Expect(jobsByOperation(tc)[infrav1.OperationApply]).To(Equal(1), "Accept never applies")
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeNumerically("<=", 3),
			"one refresh per drift found, then nothing until the next check")
	})

	It("refreshes on demand once, keeps a request made during the run, and goes through an approved refresh-only plan under Manual", func() {
		f := newFixture()
		tc := f.createCluster()
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.13.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("kubectl annotate captf.io/refresh=r1: one Refresh Job, which records the request it answers")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RefreshAnnotation] = "r1" })
		refresh := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(operationOf(refresh)).To(Equal(infrav1.OperationRefresh))
		Expect(refresh.Annotations).To(HaveKeyWithValue(infrav1.RefreshAnnotation, "r1"))

		By("a new request made while it runs is not lost: the first run clears only r1")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RefreshAnnotation] = "r2" })
		completeJob(refresh, clusterState(2, "10.13.0.1"), true, "")
		again := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(operationOf(again)).To(Equal(infrav1.OperationRefresh))
		Expect(again.Annotations).To(HaveKeyWithValue(infrav1.RefreshAnnotation, "r2"))
		completeJob(again, clusterState(3, "10.13.0.1"), true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.RefreshAnnotation))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(4), "answered: nothing runs again")

		By("under Manual a request makes a refresh-only plan, which waits for approval")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.ApplyPolicy = infrav1.ApplyPolicyManual
			tc.Annotations[infrav1.RefreshAnnotation] = "r3"
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(operationOf(plan)).To(Equal(infrav1.OperationPlan))
		Expect(plan.Annotations).To(HaveKeyWithValue(infrav1.RefreshOnlyAnnotation, "true"))
		id := completeSavedPlan(plan, 3, runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.subnet"}}, true, "")
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", id), HaveField("RefreshOnly", true), HaveField("Addresses", ConsistOf("output.subnet"))))
		Expect(envtest.Condition(tc, infrav1.DriftJobSucceededCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.PlanAwaitingApprovalReason), HaveField("Message", ContainSubstring(infrav1.ApprovePlanAnnotation+"="+id))))
		Expect(envtest.Condition(tc, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(5), "nothing is refreshed before the approval")

		By("approved, a Refresh Job applies exactly that plan, once, and the request is answered")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 5)
		Expect(operationOf(apply)).To(Equal(infrav1.OperationRefresh))
		Expect(apply.Annotations).To(HaveKeyWithValue(runnerapi.PlanIDAnnotation, id))
		completeJob(apply, clusterState(4, "10.13.0.1"), true, "")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, id))
			g.Expect(tc.Annotations).NotTo(HaveKey(infrav1.RefreshAnnotation))
			g.Expect(tc.Annotations).NotTo(HaveKey(infrav1.PendingPlanAnnotation))
			g.Expect(tc.Status.PendingPlan).To(BeNil())
		}).Should(Succeed())
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(6))
		Expect(jobsByOperation(tc)[infrav1.OperationApply]).To(Equal(1), "a refresh never applies the module")
	})
})
