package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/tfregistry"
)

// registryToken is the private registry's bearer token: it must never reach the runner's
// output or its result.
const registryToken = "registry-t0ken-5b1e"

// registryModule is the private module: one output, no provider.
var registryModule = tfregistry.Module{Namespace: "platform", Name: "network", Provider: "null", Version: "1.2.0",
	Files: map[string]string{"main.tf": "output \"cidr\" {\n  value = \"10.0.0.0/16 from the private registry\"\n}\n"}}

var _ = func() bool {
	for _, bin := range binaries {
		describeCLIConfig(bin)
	}
	return true
}()

// describeCLIConfig: the environment spec.job.cliConfig gives the main container
// (jobs.TokenEnvName, TF_CLI_CONFIG_FILE) makes the runner's terraform install a module from a
// private registry that requires a bearer token; without it, the run fails with the
// registry's refusal in its result.
func describeCLIConfig(bin string) {
	Describe(bin+": the runner with a CLI configuration", Ordered, func() {
		var reg *tfregistry.Server
		var zh string
		BeforeAll(func() {
			var err error
			reg, err = tfregistry.Start(GinkgoT().TempDir(), registryToken, registryModule)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(reg.Close)
			echo, err := tfregistry.EchoProvider()
			Expect(err).NotTo(HaveOccurred())
			zh, err = reg.AddProvider(echo)
			Expect(err).NotTo(HaveOccurred())
		})
		module := func() string {
			return fmt.Sprintf("module \"network\" {\n  source  = %q\n  version = \"1.2.0\"\n}\n\noutput \"cidr\" {\n  value = module.network.cidr\n}\n",
				registryModule.Source(reg.Host))
		}
		newObjectWith := func(module string) *stateObject {
			specs++
			ns := h.namespace(ctx, "runner-cli-")
			o := h.newObjectWithModule(ctx, bins[bin], ns, fmt.Sprintf("cli-%d", specs), GinkgoT().TempDir(), GinkgoWriter, module)
			o.prepare()
			return o
		}
		newObject := func() *stateObject { return newObjectWith(module()) }
		// trust is what the platform gives terraform for a registry with a private CA.
		trust := func() string { return "SSL_CERT_FILE=" + reg.CAFile }
		apply := func(o *stateObject, env ...string) (runnerapi.Result, int, string, string) {
			j := o.startJobOf(runnerapi.OperationApply, map[string]any{}, jobOpts{lockTimeout: 10 * time.Second, env: env})
			res, code, raw := j.wait()
			return res, code, raw, j.runner.stdout.String()
		}

		It("installs the private module with TF_TOKEN_<host>, and fails with the registry's 401 without it", func() {
			o := newObject()
			res, code, raw, out := apply(o, trust())
			Expect(code).To(Equal(runnerapi.ExitTerraformFailed), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.Error).To(ContainSubstring("401 Unauthorized"), raw)
			Expect(stepNames(res)).To(Equal([]string{"init"}))
			Expect(out).NotTo(ContainSubstring(registryToken))
			Expect(reg.Log()).To(ContainElement("GET /v1/modules/platform/network/null/versions 401"))

			res, code, raw, out = apply(o, trust(), jobs.TokenEnvName(reg.Host)+"="+registryToken)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			st, _ := o.readState()
			Expect(st.Outputs).To(HaveKeyWithValue("cidr", HaveField("Value", "10.0.0.0/16 from the private registry")))
			Expect(out + raw).NotTo(ContainSubstring(registryToken))
			Expect(reg.Log()).To(ContainElement("GET /v1/modules/platform/network/null/1.2.0/download 204"))
			fmt.Printf("binary check: a private registry module installed with %s passed with %s %s (%s)\n",
				jobs.TokenEnvName(reg.Host), o.bin.name, o.bin.version, o.bin.path)
		})

		It("reads TF_CLI_CONFIG_FILE: a credentials block there installs the module", func() {
			o := newObject()
			cfg := filepath.Join(GinkgoT().TempDir(), jobs.CLIConfigFile)
			Expect(os.WriteFile(cfg, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", reg.Host, registryToken)), 0o600)).To(Succeed())
			res, code, raw, out := apply(o, trust(), jobs.EnvCLIConfigFile+"="+cfg)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			st, _ := o.readState()
			Expect(st.Outputs).To(HaveKey("cidr"))
			Expect(out + raw).NotTo(ContainSubstring(registryToken))

			By("a CLI configuration file naming another token is refused by the registry")
			Expect(os.WriteFile(cfg, []byte(fmt.Sprintf("credentials %q {\n  token = \"wrong\"\n}\n", reg.Host)), 0o600)).To(Succeed())
			res, code, raw, _ = apply(newObject(), trust(), jobs.EnvCLIConfigFile+"="+cfg)
			Expect(code).To(Equal(runnerapi.ExitTerraformFailed), raw)
			Expect(strings.Contains(res.Error, "401 Unauthorized")).To(BeTrue(), raw)
		})

		It("installs a provider from the network mirror that TF_CLI_CONFIG_FILE names, with no other installation method", func() {
			o := newObjectWith(echoModule)
			By("without the CLI configuration, init looks for the provider's own registry, which does not exist")
			res, code, raw, _ := apply(o, trust())
			Expect(code).To(Equal(runnerapi.ExitTerraformFailed), raw)
			Expect(res.Error).To(ContainSubstring("providers.captf.test"), raw)
			Expect(reg.Log()).NotTo(ContainElement(ContainSubstring("/mirror/")))

			By("with provider_installation { network_mirror } alone, the provider comes from the mirror and runs")
			cfg := filepath.Join(GinkgoT().TempDir(), jobs.CLIConfigFile)
			Expect(os.WriteFile(cfg, []byte(mirrorOnly(reg.MirrorURL())), 0o600)).To(Succeed())
			res, code, raw, _ = apply(o, trust(), jobs.EnvCLIConfigFile+"="+cfg)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			st, _ := o.readState()
			Expect(st.Outputs).To(HaveKeyWithValue("echoed", HaveField("Value", "echo: from the mirror")))
			Expect(reg.Log()).To(ContainElements(
				"GET /mirror/providers.captf.test/captf-test/echo/index.json 200",
				"GET /mirror/providers.captf.test/captf-test/echo/1.0.0.json 200",
				ContainSubstring("GET /mirror/providers.captf.test/captf-test/echo/terraform-provider-echo_1.0.0_")))
			fmt.Printf("binary check: a provider installed from a network mirror (%s) passed with %s %s (%s)\n", zh, o.bin.name, o.bin.version, o.bin.path)
		})
	})
}

// echoModule uses the echo provider (tfregistry.EchoProvider) from a host that exists nowhere:
// only a network mirror can install it.
const echoModule = `terraform {
  required_providers {
    echo = {
      source  = "providers.captf.test/captf-test/echo"
      version = "1.0.0"
    }
  }
}

data "echo" "hello" {
  input = "from the mirror"
}

output "echoed" {
  value = data.echo.hello.output
}
`

// mirrorOnly is a CLI configuration whose only provider installation method is the network
// mirror at url.
func mirrorOnly(url string) string {
	return fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", url)
}
