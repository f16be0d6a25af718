package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// docs/sandbox.md, "clusterctl with this checkout's provider": the block runs as the page shows
// it, from the checkout, and what clusterctl generates is admitted by the sandbox.
var _ = Describe("clusterctl with this checkout's provider on the sandbox", func() {
	It("generates the topology flavor from a provider repository made from the checkout, with the ClusterClass the namespace lacks", func() {
		raw, err := os.ReadFile(filepath.Join(repo, "docs", "sandbox.md"))
		Expect(err).NotTo(HaveOccurred())
		section := string(raw)[strings.Index(string(raw), "### clusterctl with this checkout's provider"):]
		block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
		Expect(block).NotTo(BeNil(), "the section's command block")
		DeferCleanup(func() {
			_, _ = run(shared.Kubeconfig(), "kubectl", "delete", "namespace", "cc", "--wait=false")
		})
		for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir = repo
			cmd.Env = append(os.Environ(), "PWD="+repo, "KUBECONFIG="+shared.Kubeconfig(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true",
				"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			GinkgoWriter.Printf("$ %s\n%s", line, out)
			Expect(err).NotTo(HaveOccurred(), "%s: %s", line, out)
		}
		generated, err := os.ReadFile(filepath.Join(repo, "out", "cc.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, kind := range []string{"ClusterClass", "TerraformClusterTemplate", "TerraformMachineTemplate", "TerraformMachinePoolTemplate", "KubeadmControlPlaneTemplate", "Cluster"} {
			Expect(string(generated)).To(MatchRegexp(`(?m)^kind: `+kind+`$`), "out/cc.yaml holds a %s", kind)
		}
		Expect(string(generated)).NotTo(ContainSubstring("${"))
		kubectl(shared, "apply", "-n", "cc", "-f", filepath.Join(repo, "config", "samples", "modules.yaml"))
		out := kubectl(shared, "apply", "--dry-run=server", "-f", filepath.Join(repo, "out", "cc.yaml"))
		Expect(out).To(And(ContainSubstring("clusterclass.cluster.x-k8s.io/captf created (server dry run)"),
			ContainSubstring("cluster.cluster.x-k8s.io/cc created (server dry run)")))
	})
})
