package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// creatorClient is userClient whose groups may also create the three kinds and their templates.
func creatorClient(name string, groups ...string) client.Client {
	GinkgoHelper()
	c, _ := userClient(name, groups...)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "captf-test-creator"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformclusters", "terraformmachines", "terraformmachinepools",
			"terraformclustertemplates", "terraformmachinetemplates", "terraformmachinepooltemplates"}, Verbs: []string{"create", "get", "update", "patch"}}}}
	if err := admin.Create(ctx, role); err != nil {
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
	for _, g := range groups {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "captf-test-creator-" + sanitize(g)},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: g}}}
		if err := admin.Create(ctx, b); err != nil {
			Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
	}
	return c
}

// withAnnotation is a new object of kind carrying annotation k.
func withAnnotation(kind, ns, name, k, v string) client.Object {
	o := newObject(kind, ns, name)
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
	return o
}

var _ = Describe("The manager's records, through the API server", func() {
	It("refuses every record and guarded request at create, and every record change at update, to all but the manager and the override groups", func() {
		ns := newNamespace()
		dev := creatorClient("dev-records-create", "devs")
		oncall := creatorClient("oncall-records-create", breakGlassGroup)
		keys := append(infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()...)
		for _, kind := range guardedKinds {
			for i, k := range keys {
				name := fmt.Sprintf("r%d", i)
				By(kind + ": created with " + k)
				err := dev.Create(ctx, withAnnotation(kind, ns, name, k, "forged"))
				Expect(deniedByGuard(err)).To(BeTrue(), "a plain user created a %s with %s: %v", kind, k, err)
				Expect(err.Error()).To(And(ContainSubstring(k), ContainSubstring("Create the object without them")))
				err = admin.Create(ctx, withAnnotation(kind, ns, name, k, "forged"))
				Expect(deniedByGuard(err)).To(BeTrue(), "an administrator outside the override groups is refused too: %v", err)

				Expect(oncall.Create(ctx, withAnnotation(kind, ns, name, k, "moved"))).To(Succeed(), "an override group member (clusterctl move)")
				Expect(mgrClient.Create(ctx, withAnnotation(kind, ns, name+"m", k, "moved"))).To(Succeed(), "the manager")
				if !infrav1.IsManagerRecordAnnotation(k) {
					continue
				}
				By(kind + ": " + k + " changed and removed on update")
				for _, body := range []string{annotationBody(k, "forged-again"), annotationBody(k, "")} {
					if body == annotationBody(infrav1.RetryAtAnnotation, "") {
						Expect(mergePatch(dev, kind, ns, name, false, body)).To(Succeed(), "removing retry-at is a retry now (kubectl captf retry)")
						continue
					}
					err := mergePatch(dev, kind, ns, name, false, body)
					Expect(deniedByGuard(err)).To(BeTrue(), "a plain user wrote %s with %s: %v", k, body, err)
					Expect(err.Error()).To(ContainSubstring("only the CAPTF manager may write them"))
				}
				Expect(mergePatch(mgrClient, kind, ns, name, false, annotationBody(k, "by-the-manager"))).To(Succeed())
				Expect(mergePatch(oncall, kind, ns, name, false, annotationBody(k, ""))).To(Succeed())
				By(kind + ": " + k + " set on update")
				err = mergePatch(dev, kind, ns, name, false, annotationBody(k, "forged"))
				Expect(deniedByGuard(err)).To(BeTrue(), "a plain user set %s: %v", k, err)
			}
		}
	})

	It("refuses clusterctl's delete-for-move mark from anyone but the manager and the override groups, so a tenant cannot delete a paused object past its destroy", func() {
		ns := newNamespace()
		dev := creatorClient("dev-move-mark", "devs")
		oncall := creatorClient("oncall-move-mark", breakGlassGroup)
		move := infrav1.DeleteForMoveAnnotation
		for _, kind := range guardedKinds {
			By(kind + ": created with the mark")
			err := dev.Create(ctx, withAnnotation(kind, ns, "m1", move, ""))
			Expect(deniedByGuard(err)).To(BeTrue(), "a plain user created a %s with %s: %v", kind, move, err)
			Expect(err.Error()).To(And(ContainSubstring(move), ContainSubstring("without a destroy")))

			By(kind + ": the mark set on a paused object")
			Expect(dev.Create(ctx, withAnnotation(kind, ns, "m1", infrav1.PausedAnnotation, ""))).To(Succeed())
			err = mergePatch(dev, kind, ns, "m1", false, annotationBody(move, "x"))
			Expect(deniedByGuard(err)).To(BeTrue(), "a plain user set %s: %v", move, err)
			Expect(err.Error()).To(ContainSubstring("deletionPolicy Retain"))

			By(kind + ": clusterctl move, run by an override group member, sets it; anyone may keep or drop it")
			Expect(mergePatch(oncall, kind, ns, "m1", false, annotationBody(move, "x"))).To(Succeed())
			Expect(mergePatch(dev, kind, ns, "m1", false, annotationBody("example.com/note", "kept"))).To(Succeed())
			Expect(mergePatch(dev, kind, ns, "m1", false, annotationBody(move, ""))).To(Succeed())
			Expect(mgrClient.Create(ctx, withAnnotation(kind, ns, "m2", move, ""))).To(Succeed(), "the manager")
		}
	})

	It("never calls the guard for an unrelated create or update (matchCondition), and passes them", func() {
		ns := newNamespace()
		dev := creatorClient("dev-records-plain", "devs")
		before, err := webhookCalls(webhooks.GuardPath)
		Expect(err).NotTo(HaveOccurred())
		for _, kind := range guardedKinds {
			o := withAnnotation(kind, ns, "plain", "example.com/team", "infra")
			o.SetAnnotations(map[string]string{"example.com/team": "infra", infrav1.RefreshAnnotation: "now", infrav1.BlockMoveAnnotation: ""})
			Expect(dev.Create(ctx, o)).To(Succeed())
			Expect(mergePatch(dev, kind, ns, "plain", false, annotationBody(infrav1.DriftCheckAnnotation, "now"))).To(Succeed())
		}
		Expect(webhookCalls(webhooks.GuardPath)).To(Equal(before), "the guard was called for creates and updates that carry no record")
	})
})

var _ = Describe("The contract fields, through the API server", func() {
	It("refuses spec.providerID and spec.providerIDList at create and on an update to all but the manager and the override groups", func() {
		ns := newNamespace()
		dev := creatorClient("dev-contract", "devs")
		oncall := creatorClient("oncall-contract", breakGlassGroup)

		By("a plain user creates a TerraformMachine with a providerID, and a pool with a providerIDList: refused")
		m := newObject(infrav1.TerraformMachineKind, ns, "m1").(*infrav1.TerraformMachine)
		m.Spec.ProviderID = "aws:///us-east-1a/i-forged"
		err := dev.Create(ctx, m)
		Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.providerID"), ContainSubstring("docs/module-contract.md")))
		p := newObject(infrav1.TerraformMachinePoolKind, ns, "p1").(*infrav1.TerraformMachinePool)
		p.Spec.ProviderIDList = []string{"aws:///us-east-1a/i-forged"}
		Expect(deniedByGuard(dev.Create(ctx, p))).To(BeTrue())

		By("an override group member (clusterctl move) creates them")
		Expect(oncall.Create(ctx, m.DeepCopy())).To(Succeed())
		Expect(oncall.Create(ctx, p.DeepCopy())).To(Succeed())

		By("a plain user's object without them is admitted; setting them afterwards is refused")
		m2 := newObject(infrav1.TerraformMachineKind, ns, "m2").(*infrav1.TerraformMachine)
		Expect(dev.Create(ctx, m2)).To(Succeed())
		m2.Spec.ProviderID = "aws:///us-east-1a/i-forged"
		Expect(deniedByGuard(dev.Update(ctx, m2))).To(BeTrue())
		p2 := &infrav1.TerraformMachinePool{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(p), p2)).To(Succeed())
		p2.Spec.ProviderIDList = nil
		Expect(deniedByGuard(dev.Update(ctx, p2))).To(BeTrue(), "clearing the list")

		By("the manager fills them, as it does from the module's outputs")
		Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(m2), m2)).To(Succeed())
		m2.Spec.ProviderID = "aws:///us-east-1a/i-real"
		Expect(mgrClient.Update(ctx, m2)).To(Succeed())
	})
})
