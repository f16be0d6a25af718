package engine_test

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The plan Secret is writable by the tenant; these specs play the tenant rewriting its
// artifacts at each point between the Plan Job's write and the apply (docs/plans.md, "Why the
// plan you approve is the plan that applies").

// noDBDeletes makes a plan policy that forbids deleting a database, selecting f's namespace by a
// label; it is deleted when the spec ends unless the spec deleted it.
func noDBDeletes(f *fixture) *infrav1.TerraformPlanPolicy {
	GinkgoHelper()
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
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, pol))).To(Succeed()) })
	return pol
}

// appliedUnderPolicy creates a TerraformCluster a plan policy selects and plays its first
// plan (create-only, applied at once) and apply: the object is provisioned at state serial 1
// with run sequence 3 next.
func appliedUnderPolicy(f *fixture) *infrav1.TerraformCluster {
	GinkgoHelper()
	tc := f.terraformCluster().Obj()
	Expect(k8s.Create(ctx, tc)).To(Succeed())
	createJSON, createSum := jsonPlanOf("aws_db_instance.main aws_db_instance create")
	completeSavedPlan(waitForJob(tc, infrav1.TerraformClusterKind, 1), 0, createSum, false, createJSON)
	apply := waitForJob(tc, infrav1.TerraformClusterKind, 2)
	Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
	completeJob(apply, clusterState(1, "10.13.0.1"), true, "")
	Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
	return tc
}

// heldAsCorrupt waits until the object's pending plan id is held as corrupt, naming the
// artifacts, with the condition and the Warning event; then checks nothing applies.
func heldAsCorrupt(f *fixture, tc *infrav1.TerraformCluster, id string, seq int64, artifacts ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		rec := infrav1.ParsePlanRecord(get(tc).Annotations[infrav1.PendingPlanAnnotation])
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.ID).To(Equal(id))
		g.Expect(rec.Reason).To(Equal(infrav1.PlanWaitCorrupt))
		g.Expect(rec.Violations).To(BeEmpty(), "no policy judged the forgery")
		for _, a := range artifacts {
			g.Expect(rec.Corrupt).To(ContainSubstring(a))
		}
		cond := envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.PlanCorruptReason))
		g.Expect(cond.Message).To(ContainSubstring("never applied"))
		var notes []string
		for _, e := range warnings(f.ns, tc.Name, infrav1.PlanCorruptReason) {
			notes = append(notes, e.Note)
		}
		g.Expect(notes).To(ContainElement(And(ContainSubstring(id), ContainSubstring(artifacts[0]))))
	}).Should(Succeed())
	Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(seq), "a corrupt plan applies nothing")
}

var _ = Describe("Plan artifacts bound to the plan", func() {
	It("holds as corrupt a plan whose summary.json and plan.json were rewritten before bookkeeping: no policy judges the forgery, nothing applies, approved or not", func() {
		f := newFixture()
		noDBDeletes(f)
		tc := appliedUnderPolicy(f)

		By("the real plan deletes the database; the tenant rewrites summary.json and plan.json to a harmless update after the channel stored them")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		realJSON, realSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete")
		id, digests := storeSavedPlan(plan, 1, realSum, false, realJSON)
		forgedJSON, forgedSum := jsonPlanOf("terraform_data.network terraform_data update")
		s := planSecretOf(plan)
		var rec runnerapi.PlanRecord
		Expect(json.Unmarshal(s.Data[runnerapi.PlanRecordKey], &rec)).To(Succeed())
		rec.PlanSummary = forgedSum
		forged, err := json.Marshal(rec)
		Expect(err).NotTo(HaveOccurred())
		s.Data[runnerapi.PlanRecordKey], s.Data[runnerapi.PlanJSONKey] = forged, []byte(forgedJSON)
		Expect(k8s.Update(ctx, s)).To(Succeed())
		finishPlanJob(plan, id, realSum, digests)

		heldAsCorrupt(f, tc, id, 4, runnerapi.PlanRecordKey, runnerapi.PlanJSONKey)
		rec2 := infrav1.ParsePlanRecord(get(tc).Annotations[infrav1.PendingPlanAnnotation])
		Expect(rec2.Delete).To(BeEquivalentTo(1), "the counts are the runner's, not the forged summary's")
		Expect(warnings(f.ns, tc.Name, infrav1.PlanPolicyViolatedReason)).To(BeEmpty(), "the forgery was judged by no policy")

		By("an approval of the corrupt plan applies nothing")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(4))

		By("a change of the inputs replaces the corrupt plan with a new one, judged again")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		replan := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(replan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
		completeSavedPlan(replan, 1, realSum, false, realJSON)
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("Reason", infrav1.PlanWaitPolicyViolated), HaveField("Violations", HaveLen(1))))
	})

	It("trusts a Plan Job's result only from a pod the Job controls that runs its template: a labelled pod's or a self-declared owned pod's forged digests are not read", func() {
		f := newFixture()
		noDBDeletes(f)
		tc := appliedUnderPolicy(f)

		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		realJSON, realSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete")
		id, digests := storeSavedPlan(plan, 1, realSum, false, realJSON)

		By("the tenant forges summary.json and plan.json, and a pod with the Job's name label whose termination message reports their digests")
		forgedJSON, forgedSum := jsonPlanOf("terraform_data.network terraform_data update")
		s := planSecretOf(plan)
		var rec runnerapi.PlanRecord
		Expect(json.Unmarshal(s.Data[runnerapi.PlanRecordKey], &rec)).To(Succeed())
		rec.PlanSummary = forgedSum
		forged, err := json.Marshal(rec)
		Expect(err).NotTo(HaveOccurred())
		s.Data[runnerapi.PlanRecordKey], s.Data[runnerapi.PlanJSONKey] = forged, []byte(forgedJSON)
		Expect(k8s.Update(ctx, s)).To(Succeed())
		forgedDigests := runnerapi.DigestPlanArtifacts(s.Data)

		realPod, err := envtest.StartJob(ctx, k8s, plan)
		Expect(err).NotTo(HaveOccurred())
		// Created after the Job's own pod (so as new or newer) and listed before it (by name).
		fake := objects.PodOf(plan, plan.Name+"-a-forged").Obj()
		Expect(k8s.Create(ctx, fake)).To(Succeed())
		yes := true
		fr := runnerapi.Result{Operation: string(infrav1.OperationPlan), Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, Changes: &yes,
			Summary: &forgedSum, SavedPlan: &runnerapi.PlanRef{ID: id, FileSHA256: "f", Digests: &forgedDigests}}
		now := metav1.Now()
		reportForged := func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodSucceeded
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(runnerapi.Encode(fr)), StartedAt: now, FinishedAt: now}}}}
			Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		}
		reportForged(fake)

		By("and a pod that names the Job as its controller (the API server does not check that) but runs the tenant's image")
		owned := objects.PodOf(plan, plan.Name+"-a-owned").ControlledBy(plan).
			With(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "tenant.example/forger:v1" }).Obj()
		Expect(k8s.Create(ctx, owned)).To(Succeed())
		reportForged(owned)

		changes := true
		r := runnerapi.Result{Operation: string(infrav1.OperationPlan), Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{},
			Changes: &changes, Summary: &realSum, SavedPlan: &runnerapi.PlanRef{ID: id, FileSHA256: "f", Digests: &digests}}
		Expect(envtest.FinishJob(ctx, k8s, plan, realPod, true, string(runnerapi.Encode(r)))).To(Succeed())

		heldAsCorrupt(f, tc, id, 4, runnerapi.PlanRecordKey, runnerapi.PlanJSONKey)
	})

	It("holds as corrupt a held plan whose plan.txt or plan.json was rewritten after it was recorded: no Apply Job once approved", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.ApplyPolicy = infrav1.ApplyPolicyManual
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.14.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		for i, key := range []string{runnerapi.PlanTextKey, runnerapi.PlanJSONKey} {
			seq := int64(2 + i)
			By("a plan waits for approval, with the digests of its artifacts in its record; then the tenant rewrites " + key)
			update(tc, func(tc *infrav1.TerraformCluster) {
				tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"size":%d}`, 2+i))}
			})
			plan := waitForJob(tc, infrav1.TerraformClusterKind, seq)
			Expect(plan.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationPlan)))
			realJSON, realSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete")
			id := completeSavedPlan(plan, 1, realSum, false, realJSON)
			Eventually(func(g Gomega) {
				rec := infrav1.ParsePlanRecord(get(tc).Annotations[infrav1.PendingPlanAnnotation])
				g.Expect(rec).NotTo(BeNil())
				g.Expect(rec.ID).To(Equal(id))
				g.Expect(rec.Digests).NotTo(BeNil())
				g.Expect(rec.Corrupt).To(BeEmpty())
			}).Should(Succeed())
			s := planSecretOf(plan)
			s.Data[key] = []byte(`{"resource_changes":[]}`)
			Expect(k8s.Update(ctx, s)).To(Succeed())

			By("the approval of the plan starts no Apply Job: the engine checks every artifact first")
			update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = id })
			heldAsCorrupt(f, tc, id, seq+1, key)
		}
	})

	It("keeps a policy's verdict with its plan when the policy is deleted: still held, applied only once approved", func() {
		f := newFixture()
		pol := noDBDeletes(f)
		tc := appliedUnderPolicy(f)

		By("a plan that deletes the database is held by the policy")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		plan := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		deleteJSON, deleteSum := jsonPlanOf("aws_db_instance.main aws_db_instance delete")
		held := completeSavedPlan(plan, 1, deleteSum, false, deleteJSON)
		Eventually(func() *infrav1.PendingPlan { return get(tc).Status.PendingPlan }).Should(And(
			HaveField("ID", held), HaveField("Reason", infrav1.PlanWaitPolicyViolated)))

		By("the policy is deleted: the verdict stays, nothing applies")
		Expect(k8s.Delete(ctx, pol)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Name: pol.Name}, &infrav1.TerraformPlanPolicy{}))
		}).Should(BeTrue())
		// Any pass after the delete would have applied: nudge one with an unrelated annotation.
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations["captf-test/nudge"] = "1" })
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "3s").Should(BeEquivalentTo(4), "the held plan applies nothing without its policy")
		Expect(envtest.Condition(get(tc), infrav1.ApplyJobSucceededCondition)).To(HaveField("Reason", infrav1.PlanPolicyViolatedReason))

		By("an approver's approval applies exactly the held plan")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.ApprovePlanAnnotation] = held })
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(apply.Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, held))
	})
})
