package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/tfregistry"
)

// cliConfigToken is the private registry's bearer token.
const cliConfigToken = "e2e-registry-t0ken"

// cliConfigCredentials is the credentials block of testdata/cliconfig.yaml, which the spec
// removes for the object that runs without a token.
const cliConfigCredentials = `      credentials:
      - host: REGISTRY_HOST
        secretKeyRef:
          name: CLUSTER-registry-token
          key: token
`

// applyCLIConfigFixture applies testdata/cliconfig.yaml into ns for cluster, against reg,
// without its credentials when withToken is false.
func applyCLIConfigFixture(sb target, ns, cluster string, reg *tfregistry.Server, withToken bool) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", "cliconfig.yaml"))
	Expect(err).NotTo(HaveOccurred())
	doc := string(raw)
	if !withToken {
		Expect(doc).To(ContainSubstring(cliConfigCredentials))
		doc = strings.Replace(doc, cliConfigCredentials, "", 1)
	}
	// The sandbox only: its pod folders are so deep that a provider's plugin socket under the
	// runner's TMPDIR (<work>/tmp) would pass the 108-byte limit of a Unix socket path, and the
	// provider could not start; a Job's /captf/work/tmp on a node is short.
	const caEnv = "      value: REGISTRY_CA_FILE\n"
	Expect(doc).To(ContainSubstring(caEnv))
	doc = strings.Replace(doc, caEnv, caEnv+"    - name: TMPDIR\n      value: "+GinkgoT().TempDir()+"\n", 1)
	doc = strings.NewReplacer("CLUSTER", cluster, "REGISTRY_HOST", reg.Host, "MIRROR_URL", reg.MirrorURL(),
		"REGISTRY_CA_FILE", reg.CAFile, "REGISTRY_TOKEN", cliConfigToken).Replace(doc)
	f := filepath.Join(GinkgoT().TempDir(), cluster+".yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}

var _ = Describe("A Terraform CLI configuration on the sandbox", func() {
	for _, b := range binaries {
		It("installs a private registry module with its token and a provider from the mirror, and without the token fails with the registry's 401, with "+b.product, func() {
			path, line, _ := binaryVersion(b)
			By(fmt.Sprintf("the Jobs run %s: %s", line, path))
			sb := startSandboxWithManager("cliconfig-"+strings.ToLower(b.product), path, filepath.Join(built, "manager"))
			DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
			const ns = "cliconfig"
			reg := echoRegistry(cliConfigToken, tfregistry.Module{Namespace: "platform", Name: "network",
				Provider: "null", Version: "1.2.0", Files: map[string]string{"main.tf": "output \"cidr\" {\n  value = \"10.0.0.0/16\"\n}\n"}})
			createNamespace(sb, ns)

			By("with cliConfig and its credentials, kubectl apply; the apply makes the object Ready")
			applyCLIConfigFixture(sb, ns, "private", reg, true)
			eventuallyReady(sb, tc(ns, "private"))
			st := stateOf(sb, infrav1.TerraformClusterKind, ns, "private")
			Expect(st).NotTo(BeNil())
			Expect(st.Outputs).To(HaveKeyWithValue("network", HaveField("Value", "echo: 10.0.0.0/16")),
				"the module from the registry fed the provider from the mirror")
			Expect(reg.Log()).To(ContainElements(
				"GET /v1/modules/platform/network/null/1.2.0/download 204",
				"GET /mirror/providers.captf.test/captf-test/echo/index.json 200"))

			By("the same object without credentials: the apply fails, and the condition carries the registry's refusal")
			applyCLIConfigFixture(sb, ns, "no-token", reg, false)
			Eventually(func(g Gomega) {
				c := conditionOf(sb, tc(ns, "no-token"), infrav1.ApplyJobSucceededCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Message).To(ContainSubstring("401 Unauthorized"))
				g.Expect(c.Message).NotTo(ContainSubstring(cliConfigToken))
			}).Should(Succeed())
			Expect(reg.Log()).To(ContainElement("GET /v1/modules/platform/network/null/versions 401"))
			kubectl(sb, "wait", "-n", ns, "terraformcluster/no-token", "--for=condition=ApplyJobSucceeded=False", "--timeout=30s")
		})
	}
})
