package e2e_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// T20, T21 and T33 of docs/threat-model.md, as the tenant on the sandbox: the two records the guard
// once left out on an update, and templates that would have Cluster API stamp a forgery.
var _ = Describe("A tenant's records on an update and its templates", func() {
	It("is refused captf.io/state-first-run and captf.io/applied-hash on an update, and a template that stamps a record, a guarded request or an identity its namespace may not use, and a providerID it did not earn", func() {
		sb := shared
		t := asTenant(sb, "tenant-templates")
		ns := t.Namespace
		// Paused, so the manager starts no Job: the spec needs an object, not a run.
		o := objects.Cluster(ns, "tt").NoCluster().Paused().Spec(configMapModule("tt-module")).Obj()
		Expect(t.Client().Create(ctx, o)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(sb.Client().Delete(ctx, tc(ns, o.Name)))).To(Succeed())
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", o.Name, infrav1.PausedAnnotation+"-")
		})

		By("T20: the tenant sets each of the two records on an update: refused, with who may")
		for _, k := range []string{infrav1.StateFirstRunAnnotation, infrav1.AppliedHashAnnotation} {
			out, err := t.Kubectl("annotate", "terraformcluster", o.Name, k+"=forged")
			Expect(err).To(HaveOccurred(), "%s: %s", k, out)
			Expect(out).To(And(ContainSubstring("admission webhook \"guard.captf.io\" denied the request"), ContainSubstring(k)))
			AddReportEntry("T20: the tenant sets "+k, strings.TrimSpace(out))
		}
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.StateFirstRunAnnotation))
		Expect(o.Annotations).NotTo(HaveKey(infrav1.AppliedHashAnnotation))

		By("T21: a TerraformMachineTemplate that stamps a record or a guarded request: refused with what to do")
		for _, k := range []string{infrav1.AppliedHashAnnotation, infrav1.PendingPlanAnnotation, infrav1.ApprovePlanAnnotation, infrav1.DestroyWithoutPlanAnnotation} {
			mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamps"}}
			mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
			mt.Spec.Template.ObjectMeta.Annotations = map[string]string{k: "forged"}
			err := t.Client().Create(ctx, mt)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a template stamping %s: %v", k, err)
			Expect(err.Error()).To(And(ContainSubstring("spec.template.metadata.annotations["+k+"]: Forbidden"), ContainSubstring("remove it from the template")))
		}

		By("T21: a template naming an identity that does not allow the tenant's namespace: refused as the machine would be")
		id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: "tenant-templates-elsewhere"},
			Spec: infrav1.TerraformIdentitySpec{AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"platform"}},
				Env: []infrav1.IdentityEnvVar{{Name: "CLOUD_TOKEN", SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "cloud", Key: "token"}}}}}
		Expect(sb.Client().Create(ctx, id)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(sb.Client().Delete(ctx, id))).To(Succeed()) })
		mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "borrows"}}
		mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		mt.Spec.Template.Spec.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: id.Name}
		err := t.Client().Create(ctx, mt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.template.spec.job.identityRef.name: Forbidden"),
			ContainSubstring("TerraformIdentity "+id.Name+" does not allow namespace "+ns)))
		AddReportEntry("T21: the tenant's template borrows an identity", err.Error())

		By("T33: a TerraformMachine created with a providerID, and a template that stamps one: refused")
		m := objects.Machine(ns, "forged-id").NoCluster().Paused().Module("example.com/module:1").
			With(func(m *infrav1.TerraformMachine) { m.Spec.ProviderID = "aws:///us-east-1a/i-forged" }).Obj()
		err = t.Client().Create(ctx, m)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring(`admission webhook "guard.captf.io" denied the request`), ContainSubstring("spec.providerID")))
		AddReportEntry("T33: the tenant creates a machine with a providerID", err.Error())
		mt = &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamps-id"}}
		mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		mt.Spec.Template.Spec.ProviderID = "aws:///us-east-1a/i-forged"
		err = t.Client().Create(ctx, mt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.template.spec.providerID: Forbidden"))
	})
})
