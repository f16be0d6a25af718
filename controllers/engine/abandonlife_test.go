package engine_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
)

// This suite runs no admission webhook: the guard's refusal of a dormant abandon is absent, so
// what these specs see is the engine's own rule (decide.AbandonVoid).

// warnings lists the Warning events of reason about name in ns.
func warnings(ns, name, reason string) []eventsv1.Event {
	GinkgoHelper()
	return eventsOfType(ns, name, reason, corev1.EventTypeWarning)
}

// eventsOfType lists the events of type eventType and reason about name in ns.
func eventsOfType(ns, name, reason, eventType string) []eventsv1.Event {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Type == eventType {
			out = append(out, e)
		}
	}
	return out
}

// abandonPatch sets (or, with "", removes) the abandon annotation by a merge patch, as
// kubectl annotate would.
func abandonPatch(o client.Object, value string) {
	GinkgoHelper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, infrav1.AbandonInfrastructureAnnotation, v)
	Expect(k8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner("abandon-test"))).To(Succeed())
}

// appliedCluster creates a TerraformCluster and completes its first apply.
func appliedCluster() (*fixture, *infrav1.TerraformCluster) {
	GinkgoHelper()
	f := newFixture()
	tc := f.createCluster()
	st := statetest.Cluster("10.0.0.7", 6443)
	completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
	Eventually(func(g Gomega) {
		get(tc)
		g.Expect(tc.Status.IsProvisioned()).To(BeTrue())
		g.Expect(tc.Status.ActiveJob).To(BeNil())
	}).Should(Succeed())
	return f, tc
}

// setPaused pauses tc (and waits until the engine reports it paused) or unpauses it.
func setPaused(tc *infrav1.TerraformCluster, paused bool) {
	GinkgoHelper()
	v := `""`
	if !paused {
		v = "null"
	}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, infrav1.PausedAnnotation, v)
	Expect(k8s.Patch(ctx, tc, client.RawPatch(types.MergePatchType, []byte(body)))).To(Succeed())
	if paused {
		Eventually(func() *metav1.Condition { return conditionOf(get(tc), infrav1.PausedCondition) }).Should(
			And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue)))
	}
}

func conditionOf(tc *infrav1.TerraformCluster, t string) *metav1.Condition {
	for i := range tc.Status.Conditions {
		if tc.Status.Conditions[i].Type == t {
			return &tc.Status.Conditions[i]
		}
	}
	return nil
}

// destroyed completes a destroy Job and waits for the object to go.
func destroyed(tc *infrav1.TerraformCluster, job int64) {
	GinkgoHelper()
	destroy := waitForJob(tc, infrav1.TerraformClusterKind, job)
	Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
	empty := statetest.Destroyed()
	completeJob(destroy, &empty, true, "")
	Eventually(kit.Gone(tc)).Should(BeTrue())
}

var _ = Describe("The abandon applies only when it is meant now", func() {
	It("engine voids a dormant abandon set on a healthy object, and a later ordinary delete runs a destroy Job", func() {
		f, tc := appliedCluster()

		By("an abandon set on the healthy object (no webhook refuses it here): removed by the engine, with a Warning event")
		abandonPatch(tc, string(tc.UID))
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.AbandonInfrastructureAnnotation))
		Eventually(func() []eventsv1.Event { return warnings(f.ns, tc.Name, "AbandonVoided") }).ShouldNot(BeEmpty())
		note := warnings(f.ns, tc.Name, "AbandonVoided")[0].Note
		fmt.Fprintf(GinkgoWriter, "AbandonVoided: %s\n", note)
		Expect(note).To(ContainSubstring("not being deleted"))

		By("an ordinary delete: a destroy Job runs, and the object goes only after it")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroyed(tc, 2)
		Expect(warnings(f.ns, tc.Name, "InfrastructureAbandoned")).To(BeEmpty())
	})

	It("engine voids an abandon that was set before the deletion began, and the destroy runs", func() {
		f, tc := appliedCluster()

		By("paused, the engine judges no abandon: one set now survives until the deletion")
		setPaused(tc, true)
		abandonPatch(tc, string(tc.UID))
		var set time.Time
		for _, e := range get(tc).ManagedFields {
			if e.Manager == "abandon-test" && e.Time != nil {
				set = e.Time.Time
			}
		}
		Expect(set).NotTo(BeZero(), "the API server records when the annotation was set")
		// The managed fields and the deletion timestamp have a resolution of one second: the
		// deletion must fall in a later second than the annotation for the order to show.
		Eventually(func() time.Time { return time.Now().Truncate(time.Second) }).Should(BeTemporally(">", set))

		By("deleted while paused, then unpaused: the abandon predates the deletion, so it is voided and a destroy Job runs")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Expect(get(tc).Annotations).To(HaveKey(infrav1.AbandonInfrastructureAnnotation))
		Expect(decide.AbandonSetBefore(tc)).To(BeTrue())
		setPaused(tc, false)
		Eventually(func() []eventsv1.Event { return warnings(f.ns, tc.Name, "AbandonVoided") }).ShouldNot(BeEmpty())
		Expect(warnings(f.ns, tc.Name, "AbandonVoided")[0].Note).To(ContainSubstring("set before the deletion began"))
		destroyed(tc, 2)
		Expect(warnings(f.ns, tc.Name, "InfrastructureAbandoned")).To(BeEmpty())
	})

	It("engine honours an abandon set on the deleting object: it goes without a destroy Job", func() {
		f, tc := appliedCluster()

		By("paused, deleted, then abandoned, then unpaused")
		setPaused(tc, true)
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		abandonPatch(get(tc), string(tc.UID))
		Expect(decide.AbandonSetBefore(get(tc))).To(BeFalse())
		setPaused(tc, false)
		Eventually(kit.Gone(tc)).Should(BeTrue())
		// The event recorder writes events on its own goroutine: the object can be gone before
		// its event is (seen failing twice on a loaded machine when this read it at once).
		Eventually(func() []eventsv1.Event { return warnings(f.ns, tc.Name, "InfrastructureAbandoned") }).ShouldNot(BeEmpty())
		Expect(warnings(f.ns, tc.Name, "AbandonVoided")).To(BeEmpty())
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1), "only the apply ran: nothing was destroyed")
	})
})
