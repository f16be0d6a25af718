package v1alpha1_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

func withCLIConfig(mutate func(*infrav1.CLIConfig)) func(*infrav1.TerraformCluster) {
	return func(c *infrav1.TerraformCluster) {
		c.Spec.Job.CLIConfig = &infrav1.CLIConfig{
			SecretRef: &infrav1.CLIConfigKeyRef{Name: "cli", Key: "config.tfrc"},
			Credentials: []infrav1.RegistryCredential{
				{Host: "registry.example.com", SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "token", Key: "token"}},
				{Host: "127.0.0.1:8443", SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "token", Key: "mirror"}},
			},
		}
		if mutate != nil {
			mutate(c.Spec.Job.CLIConfig)
		}
	}
}

var _ = Describe("spec.job.cliConfig schema", func() {
	It("accepts a file and credentials", func() {
		Expect(k8s.Create(ctx, newCluster(uniqueName("cli"), withCLIConfig(nil)))).To(Succeed())
	})

	DescribeTable("refuses",
		func(mutate func(*infrav1.CLIConfig), field, msg string) {
			expectInvalid(k8s.Create(ctx, newCluster(uniqueName("bad-cli"), withCLIConfig(mutate))), field, msg)
		},
		Entry("both a Secret and a ConfigMap file", func(c *infrav1.CLIConfig) {
			c.ConfigMapRef = &infrav1.CLIConfigKeyRef{Name: "cli", Key: "config.tfrc"}
		}, "spec.job.cliConfig", "set at most one of cliConfig.secretRef and cliConfig.configMapRef"),
		Entry("a host listed twice", func(c *infrav1.CLIConfig) {
			c.Credentials[1].Host = c.Credentials[0].Host
		}, "spec.job.cliConfig.credentials[1]", "Duplicate value"),
		Entry("a key that is not a key", func(c *infrav1.CLIConfig) {
			c.SecretRef.Key = "../config"
		}, "spec.job.cliConfig.secretRef.key", "should match"),
	)
})
