package webhooks_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("Templates judged like the objects they stamp", func() {
	It("refuses a template that stamps a record or a guarded request onto the objects Cluster API creates", func() {
		ns := newNamespace()
		keys := append(infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()...)
		for _, k := range keys {
			mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mt-" + sanitize(strings.TrimPrefix(k, "captf.io/"))}}
			mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
			mt.Spec.Template.ObjectMeta.Annotations = map[string]string{k: "forged", "example.com/team": "infra"}
			err := mgrClient.Create(ctx, mt)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a TerraformMachineTemplate stamping %s: %v", k, err)
			Expect(err.Error()).To(And(ContainSubstring("spec.template.metadata.annotations["+k+"]: Forbidden"), ContainSubstring("remove it from the template")))
		}
		ct := &infrav1.TerraformClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ct"}}
		ct.Spec.Template.Spec.Module.Image = "example.com/module:1"
		ct.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.AppliedHashAnnotation: "h"}
		Expect(apierrors.IsInvalid(admin.Create(ctx, ct))).To(BeTrue())
		pt := &infrav1.TerraformMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pt"}}
		pt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		pt.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.ApprovePlanAnnotation: "p"}
		Expect(apierrors.IsInvalid(admin.Create(ctx, pt))).To(BeTrue())

		By("an update that adds one is refused too; an ordinary annotation passes")
		mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}}
		mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		mt.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/team": "infra"}
		Expect(admin.Create(ctx, mt)).To(Succeed())
		mt.Spec.Template.ObjectMeta.Annotations[infrav1.StateFirstRunAnnotation] = "uid/job-1"
		err := admin.Update(ctx, mt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.template.metadata.annotations[" + infrav1.StateFirstRunAnnotation + "]: Forbidden"))
	})

	It("refuses a template that stamps a providerID or a providerIDList onto the machines and pools Cluster API creates", func() {
		ns := newNamespace()
		mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mt"}}
		mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		mt.Spec.Template.Spec.ProviderID = "aws:///us-east-1a/i-forged"
		err := admin.Create(ctx, mt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.template.spec.providerID: Forbidden"), ContainSubstring("remove it from the template")))
		pt := &infrav1.TerraformMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pt"}}
		pt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		pt.Spec.Template.Spec.ProviderIDList = []string{"aws:///us-east-1a/i-forged"}
		err = admin.Create(ctx, pt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.template.spec.providerIDList: Forbidden"))
		By("without them, the templates are admitted")
		mt.Spec.Template.Spec.ProviderID, pt.Spec.Template.Spec.ProviderIDList = "", nil
		Expect(admin.Create(ctx, mt)).To(Succeed())
		Expect(admin.Create(ctx, pt)).To(Succeed())
	})

	It("refuses a template naming an identity its namespace may not use, as it refuses the machine", func() {
		ns, other := newNamespace(), newNamespace()
		newIdentity("tmpl-other-"+ns, "CLOUD_TOKEN", &infrav1.AllowedNamespaces{List: []string{other}})
		mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mt"}}
		mt.Spec.Template.Spec.Module.Image = "example.com/module:1"
		mt.Spec.Template.Spec.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: "tmpl-other-" + ns}
		err := admin.Create(ctx, mt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.template.spec.job.identityRef.name: Forbidden"),
			ContainSubstring("TerraformIdentity tmpl-other-"+ns+" does not allow namespace "+ns)))
		ct := &infrav1.TerraformClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ct"}}
		ct.Spec.Template.Spec.Module.Image = "example.com/module:1"
		ct.Spec.Template.Spec.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: "tmpl-other-" + ns}
		Expect(apierrors.IsInvalid(admin.Create(ctx, ct))).To(BeTrue())

		By("the namespace the identity allows may use it")
		mt.Namespace = other
		Expect(admin.Create(ctx, mt)).To(Succeed())
	})
})
