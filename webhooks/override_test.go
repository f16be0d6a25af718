package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// overrideEvents lists the GuardOverridden Warning events about name in ns.
func overrideEvents(ns, name string) []eventsv1.Event {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == "GuardOverridden" && e.Regarding.Name == name && e.Type == "Warning" {
			out = append(out, e)
		}
	}
	return out
}

func leaseOf(ns, name string) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}

var _ = Describe("The break-glass override", func() {
	It("lets a member of an override group force a removal with a reason set in the request, records it, and refuses everyone else", func() {
		oncall, _ := userClient("oncall", breakGlassGroup)
		dev, _ := userClient("dev", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformClusterKind
		create(kind, ns, "c")
		r, err := startRun(ctx, admin, kind, ns, "c", 2)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range allMarks {
			Expect(ensureMark(ctx, admin, kind, ns, "c", m, r.job.Name)).To(Succeed())
		}
		withReason := func(reason string) string {
			return fmt.Sprintf(`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null,"captf.io/guard-override-reason":%q}}}`, reason)
		}

		By("someone outside the override groups: denied, and told why the reason did not count")
		err = mergePatch(dev, kind, ns, "c", false, withReason("INC-42: runner wedged"))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`the override reason was ignored: user "dev" is in none of the override groups captf:breakglass`))

		By("a member without a reason: denied")
		err = mergePatch(oncall, kind, ns, "c", false, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

		By("a member with a reason set in the same request: allowed, logged, and a Warning event")
		Expect(mergePatch(oncall, kind, ns, "c", false, withReason("INC-42: runner wedged"))).To(Succeed())
		Expect(hasMark(ctx, admin, kind, ns, "c", markBlockMove)).To(BeFalse())
		Eventually(func() []eventsv1.Event { return overrideEvents(ns, "c") }).Should(HaveLen(1))
		ev := overrideEvents(ns, "c")[0]
		fmt.Printf("\nOverride event: %s %s on %s/%s: %s\n\n", ev.Type, ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Note)
		Expect(ev.Note).To(ContainSubstring("guard overridden by oncall"))
		Expect(ev.Note).To(ContainSubstring(`reason: "INC-42: runner wedged"`))
		Expect(ev.Note).To(ContainSubstring("Job " + r.job.Name))

		By("the same reason left on the object does not cover the next removal on the object")
		err = mergePatch(oncall, kind, ns, "c", false, `{"metadata":{"finalizers":null}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("an override must set a new reason in the request itself"))

		By("on /status, which cannot write metadata, the reason on the object counts")
		Expect(mergePatch(oncall, kind, ns, "c", true, `{"status":{"activeJob":null}}`)).To(Succeed())
		Eventually(func() []eventsv1.Event { return overrideEvents(ns, "c") }).Should(HaveLen(2))
		err = mergePatch(dev, kind, ns, "c", false, `{"metadata":{"annotations":{"captf.io/guard-override-reason":"mine"},"finalizers":null}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})
})

var _ = Describe("The audited abandon", func() {
	It("accepts captf.io/abandon-infrastructure only from an override group member, set to the object's UID", func() {
		oncall, _ := userClient("oncall-abandon", breakGlassGroup)
		dev, _ := userClient("dev-abandon", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformClusterKind
		o := create(kind, ns, "c")
		// Deleting, so only the membership and the UID decide (an abandon on a healthy object
		// is refused for being dormant: abandon_test.go).
		deleting(kind, ns, "c")
		abandon := func(value string) string {
			return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.AbandonInfrastructureAnnotation, value)
		}

		By("a user outside the override groups: denied, with who may")
		err := mergePatch(dev, kind, ns, "c", false, abandon(string(o.GetUID())))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("only members of the override groups may abandon infrastructure (groups " + breakGlassGroup + ")"))
		fmt.Printf("\nAbandon denial: %v\n\n", err)

		By("a member, with a value that is not the object's UID: denied")
		err = mergePatch(oncall, kind, ns, "c", false, abandon("some-other-uid"))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("must be set to the object's UID"))

		By("a member, with the UID: allowed")
		Expect(mergePatch(oncall, kind, ns, "c", false, abandon(string(o.GetUID())))).To(Succeed())
	})

	It("accepts captf.io/destroy-without-plan only from an override group member, set to the object's UID", func() {
		oncall, _ := userClient("oncall-unplanned", breakGlassGroup)
		dev, _ := userClient("dev-unplanned", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		o := create(kind, ns, "m")
		deleting(kind, ns, "m")
		unplanned := func(value string) string {
			return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.DestroyWithoutPlanAnnotation, value)
		}

		By("a user outside the override groups: denied, with what to do instead")
		err := mergePatch(dev, kind, ns, "m", false, unplanned(string(o.GetUID())))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("only members of the override groups may (groups " + breakGlassGroup + ")"))
		Expect(err.Error()).To(ContainSubstring("approves the pending destroy plan"))

		By("a member, with a value that is not the object's UID: denied")
		err = mergePatch(oncall, kind, ns, "m", false, unplanned("some-other-uid"))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("must be set to the object's UID"))

		By("a member, with the UID: allowed")
		Expect(mergePatch(oncall, kind, ns, "m", false, unplanned(string(o.GetUID())))).To(Succeed())
	})
})
