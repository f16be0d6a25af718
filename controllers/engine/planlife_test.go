package engine_test

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// completePlan plays a plan Job's runner and state channel: the plan record in the plan
// Secret, then the Job's end with the saved plan in its result.
func completePlan(job *batchv1.Job, serial uint64, counts runnerapi.PlanSummary) string {
	GinkgoHelper()
	return completeSavedPlan(job, serial, counts, false, "")
}

// completeSavedPlan is completePlan for a plan of either kind, with a JSON plan or none:
// refreshOnly marks the record as the channel does from its own flag for a refresh-only Plan
// Job; planJSON, when not empty, goes beside the record as the channel stores it. A plan made
// without a state (serial 0) records no lineage, as the channel does.
func completeSavedPlan(job *batchv1.Job, serial uint64, counts runnerapi.PlanSummary, refreshOnly bool, planJSON string) string {
	GinkgoHelper()
	id, digests := storeSavedPlan(job, serial, counts, refreshOnly, planJSON)
	finishPlanJob(job, id, counts, digests)
	return id
}

// storeSavedPlan plays a plan Job's state channel: it writes the plan record (and the JSON plan,
// when not empty) into the plan Secret and returns the plan's ID and the digests of the
// artifacts as stored, which the channel answers the runner.
func storeSavedPlan(job *batchv1.Job, serial uint64, counts runnerapi.PlanSummary, refreshOnly bool, planJSON string) (string, runnerapi.PlanDigests) {
	GinkgoHelper()
	id := fmt.Sprintf("%032x", time.Now().UnixNano())
	rec := runnerapi.PlanRecord{ID: id, FileSHA256: "f", InputsHash: job.Annotations[infrav1.InputsHashAnnotation], StateSerial: serial,
		StateLineage: "00000000-0000-4000-8000-000000000000", // statetest's lineage
		CreatedAt:    time.Now().UTC().Format(time.RFC3339), Job: job.Name, PlanSummary: counts, RefreshOnly: refreshOnly,
		// As the channel does: a destroy plan when the manager told the Job to make one.
		Destroy: job.Annotations[infrav1.DestroyPlanAnnotation] == "true"}
	if serial == 0 {
		rec.StateLineage = ""
	}
	b, err := json.Marshal(rec)
	Expect(err).NotTo(HaveOccurred())
	s := planSecretOf(job)
	s.Data = map[string][]byte{runnerapi.PlanRecordKey: b, runnerapi.PlanTextKey: []byte("Plan: the text of plan " + id + "\n")}
	if planJSON != "" {
		s.Data[runnerapi.PlanJSONKey] = []byte(planJSON)
	}
	Expect(k8s.Update(ctx, s)).To(Succeed())
	return id, runnerapi.DigestPlanArtifacts(s.Data)
}

// planSecretOf reads the plan Secret of a Job's object.
func planSecretOf(job *batchv1.Job) *corev1.Secret {
	GinkgoHelper()
	suffix := naming.StateSuffix(job.Namespace, job.Labels[infrav1.OwnerKindLabel], ownerName(job))
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: naming.PlanSecretName(suffix)}, s)).To(Succeed(),
		"the controller creates the plan Secret before the plan Job")
	return s
}

// finishPlanJob plays the plan Job's runner and the kubelet: the Job's pod ends with the saved
// plan and the digests the channel reported in its result (the termination message).
func finishPlanJob(job *batchv1.Job, id string, counts runnerapi.PlanSummary, digests runnerapi.PlanDigests) {
	GinkgoHelper()
	changes := counts.Changed() > 0
	r := runnerapi.Result{Operation: string(infrav1.OperationPlan), Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{},
		Changes: &changes, Summary: &counts, SavedPlan: &runnerapi.PlanRef{ID: id, FileSHA256: "f", Digests: &digests}}
	pod, err := envtest.StartJob(ctx, k8s, job)
	Expect(err).NotTo(HaveOccurred())
	Expect(envtest.FinishJob(ctx, k8s, job, pod, true, string(runnerapi.Encode(r)))).To(Succeed())
}

var _ = Describe("Plans", func() {
	It("under Manual: plan, wait, apply the approved plan once; changed inputs supersede a pending plan", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.ApplyPolicy = infrav1.ApplyPolicyManual
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("the first apply needs no plan")
		first := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(first.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		completeJob(first, clusterState(1, "10.11.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("changed inputs run a plan Job, not an apply, and the plan waits for approval")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		stale := completePlan(plan, 1, runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.network"}})
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", stale), HaveField("Update", int32(1)), HaveField("Addresses", ConsistOf("terraform_data.network"))))
		Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(And(HaveField("Reason", infrav1.PlanAwaitingApprovalReason),
			HaveField("Status", metav1.ConditionFalse)), "a waiting plan is a wait, as docs/plans.md says: kubectl wait --for=condition=ApplyJobSucceeded=False returns")
		Expect(envtest.Condition(tc, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue),
			"the object stays Ready while a change waits: its infrastructure is the one applied last")
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(3), "nothing is applied: no third Job")

		By("changed inputs before the approval supersede it: a new plan, and the old ID applies nothing")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
			tc.Annotations[infrav1.ApprovePlanAnnotation] = stale
		})
		replan := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(replan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		id := completePlan(replan, 1, runnerapi.PlanSummary{Update: 1})
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(HaveField("ID", id))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(4), "the old ID applies nothing")

		By("approving the current plan applies exactly it, once")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, id))
		completeJob(apply, clusterState(2, "10.11.0.1"), true, "")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, id))
			g.Expect(tc.Annotations).NotTo(HaveKey(infrav1.PendingPlanAnnotation))
			g.Expect(tc.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
			g.Expect(tc.Status.PendingPlan).To(BeNil())
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(5), "the inputs are applied: nothing runs again")
	})

	It("with the destructive guard: a plan that only creates or updates applies at once, a replace waits", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.DestructiveChanges = infrav1.DestructiveChangesRequireApproval
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.12.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("a plan of a create applies at once")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		id := completePlan(waitForJob(tc, infrav1.TerraformClusterKind, 2), 1, runnerapi.PlanSummary{Create: 1})
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, id))
		completeJob(apply, clusterState(2, "10.12.0.1"), true, "")

		By("a plan of a replace waits for approval")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		completePlan(waitForJob(tc, infrav1.TerraformClusterKind, 4), 2, runnerapi.PlanSummary{Replace: 1})
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.ApplyJobSucceededCondition) }).Should(
			HaveField("Reason", infrav1.PlanAwaitingApprovalReason))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(5), "the replace waits: no fifth Job")
	})
})
