package webhooks_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// abandonBody sets captf.io/abandon-infrastructure to value in a merge patch.
func abandonBody(value string) string {
	return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.AbandonInfrastructureAnnotation, value)
}

// deleting puts the provider finalizer on the object and deletes it, so it stays with its
// deletionTimestamp set (no controller runs in this suite).
func deleting(kind, ns, name string) {
	GinkgoHelper()
	Expect(mergePatch(admin, kind, ns, name, false, fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, infrav1.Finalizer))).To(Succeed())
	Expect(admin.Delete(ctx, u(kind, ns, name))).To(Succeed())
	o := u(kind, ns, name)
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	Expect(o.GetDeletionTimestamp()).NotTo(BeNil())
}

// stateReadable writes the object's StateReadable condition False with reason, as the engine
// reports a state hold (or a lock held by someone else).
func stateReadable(kind, ns, name, reason string) {
	GinkgoHelper()
	Expect(mergePatch(admin, kind, ns, name, true, fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"False","reason":%q,`+
		`"message":"set by the test","lastTransitionTime":"2026-12-01T10:00:00Z"}]}}`, infrav1.StateReadableCondition, reason))).To(Succeed())
}

var _ = Describe("The abandon applies only when it is meant now", func() {
	It("refuses a dormant abandon by an override group member on a healthy object, and accepts it on a deleting object and on a StateLost-holding object", func() {
		oncall, _ := userClient("oncall-dormant", breakGlassGroup)
		ns := newNamespace()
		for _, kind := range guardedKinds {
			By(kind + ": a healthy object, not deleting, not held: refused, saying when the abandon applies and what to do instead")
			o := create(kind, ns, "healthy")
			err := mergePatch(oncall, kind, ns, "healthy", false, abandonBody(string(o.GetUID())))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring("would lie dormant"), ContainSubstring("being deleted"),
				ContainSubstring("delete it first"), ContainSubstring("docs/deletion.md")))
			if kind == infrav1.TerraformClusterKind {
				fmt.Printf("\nDormant abandon denial: %v\n\n", err)
			}
			got := u(kind, ns, "healthy")
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
			Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.AbandonInfrastructureAnnotation), "the refused abandon is not on the object")

			By(kind + ": a lock held by someone else (StateLocked) is no hold: refused")
			stateReadable(kind, ns, "healthy", infrav1.StateLockedReason)
			err = mergePatch(oncall, kind, ns, "healthy", false, abandonBody(string(o.GetUID())))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

			By(kind + ": the same object, once deleting: accepted")
			deleting(kind, ns, "healthy")
			Expect(mergePatch(oncall, kind, ns, "healthy", false, abandonBody(string(o.GetUID())))).To(Succeed())

			By(kind + ": an object its lost state holds (StateReadable=False, StateLost), not deleting: accepted")
			lost := create(kind, ns, "lost")
			stateReadable(kind, ns, "lost", infrav1.StateLostReason)
			Expect(mergePatch(oncall, kind, ns, "lost", false, abandonBody(string(lost.GetUID())))).To(Succeed())

			By(kind + ": an object whose state cannot be read (StateCorrupt): accepted")
			corrupt := create(kind, ns, "corrupt")
			stateReadable(kind, ns, "corrupt", infrav1.StateCorruptReason)
			Expect(mergePatch(oncall, kind, ns, "corrupt", false, abandonBody(string(corrupt.GetUID())))).To(Succeed())
		}
	})
})

// TestAbandonApplies holds the pure rule the guard applies to the old object.
func TestAbandonApplies(t *testing.T) {
	now := metav1.Now()
	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: infrav1.StateReadableCondition, Status: status, Reason: reason}}
	}
	for _, c := range []struct {
		name     string
		deleting bool
		conds    []metav1.Condition
		want     bool
	}{
		{"healthy, no conditions", false, nil, false},
		{"healthy, state readable", false, cond(metav1.ConditionTrue, infrav1.StateReadableReason), false},
		{"a lock held by someone else is no hold", false, cond(metav1.ConditionFalse, infrav1.StateLockedReason), false},
		{"deleting", true, nil, true},
		{"deleting, state readable", true, cond(metav1.ConditionTrue, infrav1.StateReadableReason), true},
		{"state lost", false, cond(metav1.ConditionFalse, infrav1.StateLostReason), true},
		{"state corrupt", false, cond(metav1.ConditionFalse, infrav1.StateCorruptReason), true},
		{"state of an unknown layout", false, cond(metav1.ConditionFalse, infrav1.StateLayoutUnknownReason), true},
		{"another condition False is no hold", false, []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.StateLostReason}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &webhooks.Marks{}
			if c.deleting {
				m.DeletionTimestamp = &now
			}
			m.Status.Conditions = c.conds
			got, grounds := webhooks.AbandonApplies(m)
			if got != c.want || got != (grounds != "") {
				t.Errorf("AbandonApplies = %v (%q), want %v", got, grounds, c.want)
			}
		})
	}
	msg := webhooks.DormantAbandonRefusal(webhooks.ObjectRef{Kind: infrav1.TerraformClusterKind, Namespace: "ns", Name: "c"})
	for _, want := range []string{infrav1.AbandonInfrastructureAnnotation, "being deleted", "delete it first", "deletionPolicy: Retain", "docs/deletion.md"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
}
