package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// The state's identity (docs/state.md, "Whose state it is"): the suite runs no webhook, so the
// opt-in is set directly; the webhook suite proves who may set it.

const (
	retainedLineage = "7d1e2f30-aaaa-4bbb-8ccc-000000000001"
	ownLineage      = "7d1e2f30-aaaa-4bbb-8ccc-000000000002"
	foreignLineage  = "7d1e2f30-aaaa-4bbb-8ccc-000000000003"
)

// warningEvents counts the Warning events of reason about the object named name in ns.
func warningEvents(ns, name, reason string) int {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// jobOf reports whether the Job of run number seq of the object exists (the finished Jobs of
// earlier runs may be pruned, so a count would not say what started).
func jobOf(o client.Object, seq int64) func() bool {
	return func() bool {
		return jobExists(o.GetNamespace(), naming.JobName(suffixOf(o, infrav1.TerraformClusterKind), seq))
	}
}

func jobExists(ns, name string) bool {
	GinkgoHelper()
	err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &batchv1.Job{})
	if err != nil && !apierrors.IsNotFound(err) {
		Fail(err.Error())
	}
	return err == nil
}

func stateReadable(o *infrav1.TerraformCluster) func() *metav1.Condition {
	return func() *metav1.Condition { return envtest.Condition(get(o), infrav1.StateReadableCondition) }
}

var _ = Describe("The state's identity", func() {
	It("a new object that finds a retained state holds with RetainedStateFound and runs no Job; with the opt-in it applies on top of that state", func() {
		f := newFixture()
		tc := f.createCluster()
		stateName := naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind))
		first := clusterState(1, "10.9.0.1")
		first.Lineage = retainedLineage
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), first, true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).Should(
			HaveKeyWithValue(infrav1.StateLineageAnnotation, retainedLineage), "the first Job's lineage is the object's own")

		By("deleted with deletionPolicy Retain, it leaves its state behind")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.DeletionPolicy = infrav1.DeletionPolicyRetain })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(secretOf(f.ns, stateName).Annotations).To(HaveKeyWithValue(infrav1.RetainedAnnotation, "true"))

		By("a new object of the same name holds: StateReadable=False, RetainedStateFound, and Ready says so")
		again := f.createCluster()
		Eventually(stateReadable(again)).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.RetainedStateFoundReason), HaveField("Message", ContainSubstring(retainedLineage))))
		Expect(envtest.Condition(get(again), infrav1.ReadyCondition)).To(HaveField("Reason", infrav1.RetainedStateFoundReason))

		By("it runs no Job, however often it is reconciled, and reports the hold with one Warning event")
		kit.Poke(again)
		Consistently(jobOf(again, 2), "2s").Should(BeFalse(), "nothing runs against a state the new object never wrote")
		Eventually(func() int { return warningEvents(f.ns, again.Name, infrav1.RetainedStateFoundReason) }).Should(Equal(1))

		By("an opt-in naming another lineage adopts nothing")
		update(again, func(o *infrav1.TerraformCluster) { o.Annotations[infrav1.AdoptStateAnnotation] = foreignLineage })
		Consistently(jobOf(again, 2), "2s").Should(BeFalse())
		Expect(stateReadable(again)()).To(HaveField("Reason", infrav1.RetainedStateFoundReason))

		By("the opt-in naming the state's lineage: an apply pinned to that lineage, on top of the old state")
		update(again, func(o *infrav1.TerraformCluster) { o.Annotations[infrav1.AdoptStateAnnotation] = retainedLineage })
		// Run 1 is the earlier object's Job: the new object moves past it.
		apply := waitForJob(again, infrav1.TerraformClusterKind, 2)
		Expect(metav1.GetControllerOf(apply).UID).To(Equal(again.UID))
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(jobs.StateLineageOf(apply)).To(Equal(retainedLineage), "the Job's state channel serves only the adopted state")
		next := clusterState(2, "10.9.0.1")
		next.Lineage = retainedLineage
		completeJob(apply, next, true, "")
		Eventually(func(g Gomega) {
			get(again)
			g.Expect(again.Status.IsProvisioned()).To(BeTrue())
			g.Expect(again.Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, retainedLineage))
			g.Expect(again.Annotations).NotTo(HaveKey(infrav1.AdoptStateAnnotation), "the opt-in has done its work")
		}).Should(Succeed())
		Expect(stateReadable(again)()).To(HaveField("Status", metav1.ConditionTrue))
	})

	It("an object whose first apply wrote the state but was never counted (its Job deleted) takes that state as its own, not as retained", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(get(tc).Annotations).To(HaveKeyWithValue(infrav1.StateFirstRunAnnotation, string(tc.UID)+"/"+job.Name),
			"the first apply started against no state is marked")

		By("the Job writes the state, then goes before it was counted (as kubectl delete job --cascade=orphan does)")
		st := clusterState(1, "10.9.2.1")
		st.Lineage = ownLineage
		Expect(statetest.Write(ctx, k8s, f.ns, suffix, *st)).To(Succeed())
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func() bool { return jobExists(f.ns, job.Name) }).Should(BeFalse())
		clk.Step(2 * time.Minute) // past the run lease's grace: nothing of that Job is left
		kit.Poke(tc)

		By("the run, never counted, runs again on that state, pinned to its lineage, and the lineage is recorded as the object's own")
		// The run sequence moves on only when a run is counted: run 1 runs again, a new Job.
		apply := &batchv1.Job{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), apply)).To(Succeed())
			g.Expect(apply.UID).NotTo(Equal(job.UID))
		}).Should(Succeed())
		Expect(jobs.StateLineageOf(apply)).To(Equal(ownLineage))
		next := clusterState(2, "10.9.2.1")
		next.Lineage = ownLineage
		completeJob(apply, next, true, "")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Status.IsProvisioned()).To(BeTrue())
			g.Expect(tc.Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, ownLineage))
			g.Expect(tc.Annotations).NotTo(HaveKey(infrav1.StateFirstRunAnnotation), "the mark has done its work")
		}).Should(Succeed())
		Expect(warningEvents(f.ns, tc.Name, infrav1.RetainedStateFoundReason)).To(BeZero())
	})

	It("a deleting new object that finds a retained state lets go without a destroy and leaves that state as it is", func() {
		f := newFixture()
		tc := f.createCluster()
		stateName := naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind))
		first := clusterState(1, "10.9.1.1")
		first.Lineage = retainedLineage
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), first, true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).Should(HaveKey(infrav1.StateLineageAnnotation))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.DeletionPolicy = infrav1.DeletionPolicyRetain })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(kit.Gone(tc)).Should(BeTrue())
		before := secretOf(f.ns, stateName)

		again := f.createCluster()
		Eventually(stateReadable(again)).Should(And(Not(BeNil()), HaveField("Reason", infrav1.RetainedStateFoundReason)))
		Expect(k8s.Delete(ctx, again)).To(Succeed())
		Eventually(kit.Gone(again)).Should(BeTrue())
		Expect(jobOf(again, 2)()).To(BeFalse(), "no destroy Job of someone else's infrastructure")
		after := secretOf(f.ns, stateName)
		Expect(after.Data).To(Equal(before.Data), "the retained state is left as it was")
	})

	It("an object whose state lineage changed outside a restore holds and runs no Job; a restore of the old lineage's backup releases it", func() {
		f := newFixture()
		tc := f.createCluster()
		first := clusterState(1, "10.9.2.1")
		first.Lineage = ownLineage
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), first, true, "")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, ownLineage))
			g.Expect(tc.Status.StateBackups).To(HaveLen(1))
		}).Should(Succeed())

		By("an apply whose module writes a state of another lineage")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(jobs.StateLineageOf(apply)).To(Equal(ownLineage))
		hostile := clusterState(7, "10.9.2.1")
		hostile.Lineage = foreignLineage
		completeJob(apply, hostile, true, "")

		By("the object holds at once: StateLineageChanged, saying to restore the old lineage's backup, and one Warning event")
		Eventually(stateReadable(tc)).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.StateLineageChangedReason),
			HaveField("Message", And(ContainSubstring(ownLineage), ContainSubstring(infrav1.RestoreStateAnnotation)))))
		Expect(get(tc).Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, ownLineage), "the own lineage never follows the state")
		Eventually(func() int { return warningEvents(f.ns, tc.Name, infrav1.StateLineageChangedReason) }).Should(Equal(1))

		By("an input change starts no Job against the replaced state")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		Consistently(jobOf(tc, 3), "2s").Should(BeFalse())
		Expect(stateReadable(tc)()).To(HaveField("Reason", infrav1.StateLineageChangedReason))
		Expect(warningEvents(f.ns, tc.Name, infrav1.StateLineageChangedReason)).To(Equal(1), "one event for the hold, not one per pass")

		By("a restore of the replacing lineage's backup is refused")
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(ContainElement(HaveField("Serial", BeEquivalentTo(7))))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "7" })
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.RestoreJobSucceededCondition) }).Should(
			And(Not(BeNil()), HaveField("Reason", infrav1.RestoreRefusedReason)))
		Expect(jobOf(tc, 3)()).To(BeFalse())

		By("a restore of the old lineage's backup runs, and releases the hold")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "1" })
		restore := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(restore.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationRestore)))
		restored := clusterState(8, "10.9.2.1")
		restored.Lineage = ownLineage
		completeJob(restore, restored, true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.StateLineageSeenAnnotation))
		apply = waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(jobs.StateLineageOf(apply)).To(Equal(ownLineage))
	})
})
