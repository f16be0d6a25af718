package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// normalNotes lists the notes of the Normal events of reason about name in ns.
func normalNotes(ns, name, reason string) []string {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Type == corev1.EventTypeNormal {
			out = append(out, e.Note)
		}
	}
	return out
}

var _ = Describe("Drift checks asked for", func() {
	It("start a check now whatever the schedule, answer the request once it ended, keep a request made during the check, and come after an apply", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			// A year: the suite's clock never gets there, so no check is due by the schedule.
			s.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: 365 * 24 * time.Hour}, Mode: infrav1.DriftModeReport}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.14.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(2), "no check is due for a year")

		By("kubectl annotate captf.io/drift-check=c1: a Drift Job starts now, under the run lease alone, and records the request")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.DriftCheckAnnotation] = "c1" })
		check := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(operationOf(check)).To(Equal(infrav1.OperationDrift))
		Expect(check.Annotations).To(HaveKeyWithValue(infrav1.DriftCheckAnnotation, "c1"))
		for _, l := range leasesOf(f.ns) {
			Expect(l.Labels[infrav1.LeaseLabel]).To(Equal(infrav1.LeaseKindRun), "lease %s", l.Name)
		}

		By("a new request made while the check runs survives it: the count removes only c1")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.DriftCheckAnnotation] = "c2" })
		completeDrift(check, true)
		again := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(operationOf(again)).To(Equal(infrav1.OperationDrift))
		Expect(again.Annotations).To(HaveKeyWithValue(infrav1.DriftCheckAnnotation, "c2"))
		Expect(get(tc).Annotations).To(HaveKeyWithValue(infrav1.DriftCheckAnnotation, "c2"))
		Expect(envtest.Condition(tc, infrav1.DriftDetectedCondition)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.DriftFoundReason)))
		// Events are written asynchronously by the recorder: wait for it.
		Eventually(func() []string { return normalNotes(f.ns, tc.Name, "DriftCheckAnswered") }).Should(ContainElement(And(
			ContainSubstring("Job "+check.Name+" answered the drift check asked for ("+infrav1.DriftCheckAnnotation+"=c1): it found drift"),
			ContainSubstring("the newer request c2 runs next"))))

		By("a failed check answers its request too: the annotation goes and nothing runs again")
		pod, err := envtest.StartJob(ctx, k8s, again)
		Expect(err).NotTo(HaveOccurred())
		Expect(envtest.FinishJob(ctx, k8s, again, pod, false, "")).To(Succeed())
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.DriftCheckAnnotation))
		// The annotation and the status are two patches: the condition may follow a moment later.
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftJobSucceededCondition) }).Should(
			HaveField("Status", metav1.ConditionFalse))
		Eventually(func() []string { return normalNotes(f.ns, tc.Name, "DriftCheckAnswered") }).Should(ContainElement(
			ContainSubstring("Job " + again.Name + " answered the drift check asked for (" + infrav1.DriftCheckAnnotation + "=c2): it did not succeed")))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(4), "answered: no check runs again")

		By("new inputs and a request in one write: the apply goes first, the check follows it")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
			tc.Annotations[infrav1.DriftCheckAnnotation] = "c3"
		})
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(operationOf(apply)).To(Equal(infrav1.OperationApply))
		Expect(apply.Annotations).NotTo(HaveKey(infrav1.DriftCheckAnnotation))
		completeJob(apply, clusterState(2, "10.14.0.1"), true, "")
		after := waitForJob(tc, infrav1.TerraformClusterKind, 5)
		Expect(operationOf(after)).To(Equal(infrav1.OperationDrift))
		Expect(after.Annotations).To(HaveKeyWithValue(infrav1.DriftCheckAnnotation, "c3"))

		By("with the schedule off (no interval here, none in the manager) a request still runs one check")
		completeDrift(after, false)
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.DriftCheckAnnotation))
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftDetectedCondition) }).Should(
			HaveField("Reason", infrav1.NoDriftReason))
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Drift.Interval = nil
			tc.Annotations[infrav1.DriftCheckAnnotation] = "c4"
		})
		off := waitForJob(tc, infrav1.TerraformClusterKind, 6)
		Expect(operationOf(off)).To(Equal(infrav1.OperationDrift))
		completeDrift(off, false)
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.DriftCheckAnnotation))
		Consistently(func() int64 { return runSeqOf(get(tc)) }, "2s").Should(BeEquivalentTo(7), "answered, and Report applies nothing")
	})
})
