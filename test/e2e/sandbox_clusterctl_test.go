package e2e_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// docs/sandbox.md, "clusterctl with this checkout's provider": the block runs as the page shows
// it, from the checkout, and what clusterctl generates is admitted by the sandbox.
var _ = Describe(doccmd.SpecClusterctl, func() {
	It("generates the topology flavor from a provider repository made from the checkout, with the ClusterClass the namespace lacks", func() {
		DeferCleanup(func() {
			_, _ = run(shared.Kubeconfig(), "kubectl", "delete", "namespace", "cc", "--wait=false")
		})
		docs := newDocShell(repo, "KUBECONFIG="+shared.Kubeconfig(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true",
			"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		for _, prefix := range []string{"make release-manifests ", "printf 'providers:", "kubectl create namespace cc", "clusterctl generate cluster cc "} {
			docs.ok("docs/sandbox.md", prefix)
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
