package webhooks_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// TestValidateCLIConfig: a credential host must be a lowercase DNS host name with an optional
// port; TF_CLI_CONFIG_FILE and TF_TOKEN_* stay reserved in spec.job.env, so they come only
// from spec.job.cliConfig.
func TestValidateCLIConfig(t *testing.T) {
	withHosts := func(hosts ...string) *infrav1.TerraformSpec {
		s := spec("")
		s.Job.CLIConfig = &infrav1.CLIConfig{ConfigMapRef: &infrav1.CLIConfigKeyRef{Name: "cli", Key: "config.tfrc"}}
		for _, h := range hosts {
			s.Job.CLIConfig.Credentials = append(s.Job.CLIConfig.Credentials,
				infrav1.RegistryCredential{Host: h, SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "token", Key: "token"}})
		}
		return s
	}
	cases := []struct {
		name string
		spec *infrav1.TerraformSpec
		want []string
	}{
		{"valid hosts", withHosts("registry.example.com", "127.0.0.1:8443", "xn--caf-dma.fr"), nil},
		{"file only", withHosts(), nil},
		{"invalid hosts", withHosts("ok.example.com", "Registry.Example.com", "https://r.example.com", "r.example.com:0", "r_x.example.com"), []string{
			`spec.job.cliConfig.credentials[1].host: Invalid value: "Registry.Example.com"`,
			`spec.job.cliConfig.credentials[2].host: Invalid value: "https://r.example.com"`,
			`spec.job.cliConfig.credentials[3].host: Invalid value: "r.example.com:0"`,
			`spec.job.cliConfig.credentials[4].host: Invalid value: "r_x.example.com"`}},
		{"TF_CLI_CONFIG_FILE and TF_TOKEN_ in env", spec("", "TF_CLI_CONFIG_FILE", "TF_TOKEN_registry_example_com", "TF_PLUGIN_CACHE_DIR"), []string{
			"spec.job.env[0].name: Forbidden: TF_CLI_CONFIG_FILE is reserved",
			"spec.job.env[1].name: Forbidden: TF_TOKEN_registry_example_com is reserved",
			"spec.job.env[2].name: Forbidden: TF_PLUGIN_CACHE_DIR is reserved"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := webhooks.ValidateTerraformSpec(field.NewPath("spec"), c.spec)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			all := strings.Join(got, "\n")
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(c.want), all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("missing %q in:\n%s", w, all)
				}
			}
		})
	}
}
