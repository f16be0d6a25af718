package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// annotationBody sets annotation k to v in a merge patch (v "" removes it).
func annotationBody(k, v string) string {
	if v == "" {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, k)
	}
	return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
}

var _ = Describe("Adopting a retained state", func() {
	const lineage = "0c4f9a2e-1111-4222-8333-000000000042"

	It("refuses the adopt-state opt-in from a user outside the override groups and accepts it from an override group member", func() {
		oncall, _ := userClient("oncall-adopt", breakGlassGroup)
		dev, _ := userClient("dev-adopt", "devs")
		ns := newNamespace()
		for _, kind := range guardedKinds {
			create(kind, ns, "again")
			annotations := func() map[string]string {
				o := u(kind, ns, "again")
				Expect(admin.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				return o.GetAnnotations()
			}

			By(kind + ": a user outside the override groups: refused, naming who may")
			err := mergePatch(dev, kind, ns, "again", false, annotationBody(infrav1.AdoptStateAnnotation, lineage))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring(infrav1.AdoptStateAnnotation), ContainSubstring(breakGlassGroup)))
			Expect(annotations()).NotTo(HaveKey(infrav1.AdoptStateAnnotation), "the refused opt-in is not on the object")

			By(kind + ": an override group member: accepted")
			Expect(mergePatch(oncall, kind, ns, "again", false, annotationBody(infrav1.AdoptStateAnnotation, lineage))).To(Succeed())
			Expect(annotations()).To(HaveKeyWithValue(infrav1.AdoptStateAnnotation, lineage))

			By(kind + ": changing it to another lineage is an opt-in too: refused to a non-member")
			err = mergePatch(dev, kind, ns, "again", false, annotationBody(infrav1.AdoptStateAnnotation, lineage+"0"))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(annotations()).To(HaveKeyWithValue(infrav1.AdoptStateAnnotation, lineage))
		}
	})

	It("refuses a change of the controller's state lineage record to anyone but the manager and the override groups", func() {
		oncall, _ := userClient("oncall-lineage", breakGlassGroup)
		dev, _ := userClient("dev-lineage", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformClusterKind
		create(kind, ns, "held")

		By("the manager records the lineage")
		Expect(mergePatch(mgrClient, kind, ns, "held", false, annotationBody(infrav1.StateLineageAnnotation, lineage))).To(Succeed())

		By("a user outside the override groups can neither change nor remove it, nor the lineage note")
		for _, body := range []string{annotationBody(infrav1.StateLineageAnnotation, lineage+"0"), annotationBody(infrav1.StateLineageAnnotation, ""),
			annotationBody(infrav1.StateLineageSeenAnnotation, lineage)} {
			err := mergePatch(dev, kind, ns, "held", false, body)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", body, err)
			Expect(err.Error()).To(ContainSubstring(infrav1.RestoreStateAnnotation))
		}

		By("an override group member can")
		Expect(mergePatch(oncall, kind, ns, "held", false, annotationBody(infrav1.StateLineageAnnotation, lineage+"0"))).To(Succeed())
	})
})
