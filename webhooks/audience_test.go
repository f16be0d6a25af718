package webhooks_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The identity token audience at admission", func() {
	It("refuses an identity token audience the API server accepts, on create and on update, and admits a cloud audience", func() {
		// The suite's webhooks (webhooks.Setup with no Audiences) probe through the account
		// default/captf-audience-probe, which the manager creates when it starts.
		probe := types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: jobs.DefaultAudienceProbeAccountName}
		Expect(jobs.EnsureAudienceProbeAccount(ctx, admin, admin, probe)).To(Succeed())
		auds, err := envtest.APIServerAudiences(ctx, admin, probe)
		Expect(err).NotTo(HaveOccurred())
		aud := auds[0]
		warnings := &warningRecorder{}
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace()
		withAudience := func(kind, name, audience string) client.Object {
			o := newObject(kind, ns, name)
			o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.IdentityToken = &infrav1.IdentityToken{Audience: audience}
			return o
		}

		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			short := strings.ToLower(kind)
			By(kind + ": the API server's own audience (in no list) is refused, naming it and why")
			err := c.Create(ctx, withAudience(kind, short+"-a", aud))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring("spec.job.identityToken.audience: Forbidden"), ContainSubstring(aud),
				ContainSubstring("TokenReview"), ContainSubstring("sts.amazonaws.com")))

			By(kind + ": a well-known in-cluster audience is refused")
			err = c.Create(ctx, withAudience(kind, short+"-b", "https://kubernetes.default.svc.cluster.local"))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("well-known audience of the Kubernetes API server"))

			By(kind + ": a cloud audience is admitted without a warning")
			warnings.take()
			o := withAudience(kind, short+"-c", "sts.amazonaws.com")
			Expect(c.Create(ctx, o)).To(Succeed())
			Expect(warnings.take()).To(BeEmpty())

			By(kind + ": changing it to the API server's audience is refused")
			Expect(c.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.IdentityToken.Audience = aud
			err = c.Update(ctx, o)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("spec.job.identityToken.audience: Forbidden"))
		}

		By("a template whose stamped objects would carry the API server's audience is refused too")
		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamp"}}
		tmpl.Spec.Template.Spec.Module.Image = "example.com/module:1"
		tmpl.Spec.Template.Spec.Job.IdentityToken = &infrav1.IdentityToken{Audience: aud}
		err = c.Create(ctx, tmpl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.template.spec.job.identityToken.audience: Forbidden"), ContainSubstring(aud)))
		tmpl.Spec.Template.Spec.Job.IdentityToken.Audience = "sts.amazonaws.com"
		Expect(c.Create(ctx, tmpl)).To(Succeed())
	})
})
