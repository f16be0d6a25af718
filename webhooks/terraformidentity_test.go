package webhooks_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// newIdentity creates a TerraformIdentity (cluster-scoped) named name with one variable.
func newIdentity(name, variable string, allowed *infrav1.AllowedNamespaces) {
	GinkgoHelper()
	id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.TerraformIdentitySpec{
		AllowedNamespaces: allowed,
		Env:               []infrav1.IdentityEnvVar{{Name: variable, SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "cloud", Key: "token"}}},
	}}
	Expect(admin.Create(ctx, id)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(ctx, id))).To(Succeed()) })
}

// withIdentity is an object of kind that references the identity name.
func withIdentity(kind, ns, name, identity string) client.Object {
	o := newObject(kind, ns, name)
	o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: identity}
	return o
}

var _ = Describe("spec.job.identityRef at admission", func() {
	var (
		c        client.Client
		warnings *warningRecorder
	)
	BeforeEach(func() {
		warnings = &warningRecorder{}
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warnings
		var err error
		c, err = client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
	})

	It("admits an identity reference from a namespace the identity allows by list or by selector", func() {
		listed, labelled := newNamespace(), newNamespace()
		nsObj := &corev1.Namespace{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: labelled}, nsObj)).To(Succeed())
		nsObj.Labels = map[string]string{"captf-test/tenant": labelled}
		Expect(admin.Update(ctx, nsObj)).To(Succeed())
		newIdentity("by-list-"+listed, "CLOUD_TOKEN", &infrav1.AllowedNamespaces{List: []string{listed}})
		newIdentity("by-selector-"+labelled, "CLOUD_TOKEN", &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"captf-test/tenant": labelled}}})
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			Expect(c.Create(ctx, withIdentity(kind, listed, "by-list", "by-list-"+listed))).To(Succeed())
			Expect(c.Create(ctx, withIdentity(kind, labelled, "by-selector", "by-selector-"+labelled))).To(Succeed())
		}
		Expect(warnings.take()).To(BeEmpty())
	})

	It("refuses an identity reference from a namespace the identity does not allow", func() {
		ns, other := newNamespace(), newNamespace()
		newIdentity("other-team-"+ns, "CLOUD_TOKEN", &infrav1.AllowedNamespaces{List: []string{other},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf-test/tenant": other}}})
		newIdentity("unscoped-"+ns, "CLOUD_TOKEN", nil)
		newIdentity("reserved-"+ns, "TF_VAR_token", &infrav1.AllowedNamespaces{})
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			By(kind + ": an identity that lists and selects another namespace")
			err := c.Create(ctx, withIdentity(kind, ns, "a", "other-team-"+ns))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring("spec.job.identityRef.name: Forbidden"),
				ContainSubstring("TerraformIdentity other-team-"+ns+" does not allow namespace "+ns),
				ContainSubstring("spec.allowedNamespaces.list")))

			By(kind + ": an identity with allowedNamespaces unset allows no namespace")
			err = c.Create(ctx, withIdentity(kind, ns, "b", "unscoped-"+ns))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("allowedNamespaces is unset, which allows no namespace"))

			By(kind + ": an identity that sets a reserved variable")
			err = c.Create(ctx, withIdentity(kind, ns, "c", "reserved-"+ns))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("TF_VAR_token, which CAPTF reserves"))

			By(kind + ": an update that keeps the reference is not judged again (the engine judges it before every Job)")
			kept := withIdentity(kind, other, "e", "other-team-"+ns)
			Expect(c.Create(ctx, kept)).To(Succeed())
			id := &infrav1.TerraformIdentity{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: "other-team-" + ns}, id)).To(Succeed())
			id.Spec.AllowedNamespaces.List = []string{"nobody"}
			Expect(admin.Update(ctx, id)).To(Succeed())
			Expect(c.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
			kept.SetAnnotations(map[string]string{"captf-test/edited": "yes"})
			kept.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.ActiveDeadlineSeconds = ptr.To[int64](1200)
			Expect(c.Update(ctx, kept)).To(Succeed())
			id.Spec.AllowedNamespaces.List = []string{other}
			Expect(admin.Update(ctx, id)).To(Succeed())

			By(kind + ": an update that sets the reference is judged too")
			o := newObject(kind, ns, "d")
			Expect(c.Create(ctx, o)).To(Succeed())
			o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: "other-team-" + ns}
			err = c.Update(ctx, o)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("does not allow namespace " + ns))
		}
	})

	It("admits a reference to a missing identity with a warning", func() {
		ns := newNamespace()
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			Expect(c.Create(ctx, withIdentity(kind, ns, "a", "missing-"+ns))).To(Succeed())
			Expect(warnings.take()).To(ContainElement(And(ContainSubstring("TerraformIdentity missing-"+ns+", which does not exist"),
				ContainSubstring(infrav1.IdentityNotFoundReason))))
		}
	})
})
