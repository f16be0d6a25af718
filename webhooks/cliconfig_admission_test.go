package webhooks_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("CLI configuration admission", func() {
	It("refuses a credential host that is not a DNS host name, on objects and templates, and admits one with a port", func() {
		ns := newNamespace()
		creds := func(host string) *infrav1.CLIConfig {
			return &infrav1.CLIConfig{Credentials: []infrav1.RegistryCredential{
				{Host: host, SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "token", Key: "token"}}}}
		}
		bad := newObject(infrav1.TerraformClusterKind, ns, "bad").(*infrav1.TerraformCluster)
		bad.Spec.Job.CLIConfig = creds("https://Registry.Example.com")
		err := admin.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring(`validate.terraformcluster.captf.io`),
			ContainSubstring(`spec.job.cliConfig.credentials[0].host: Invalid value: "https://Registry.Example.com"`)))

		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}}
		tmpl.Spec.Template.Spec.Module.Image = "example.com/module:1"
		tmpl.Spec.Template.Spec.Job.CLIConfig = creds("registry.example.com:0")
		err = admin.Create(ctx, tmpl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.template.spec.job.cliConfig.credentials[0].host: Invalid value: "registry.example.com:0"`))

		good := newObject(infrav1.TerraformClusterKind, ns, "good").(*infrav1.TerraformCluster)
		good.Spec.Job.CLIConfig = creds("registry.example.com:8443")
		Expect(admin.Create(ctx, good)).To(Succeed())
	})
})
