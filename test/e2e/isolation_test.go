package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// probeModule is a hostile module: its local-exec looks where a container finds Kubernetes
// credentials (the service account token paths, KUBE_* and KUBECONFIG, JWTs in the
// environment, token files under its own folders; KUBERNETES_SERVICE_HOST/PORT are an address,
// not a credential, and every pod has them), then uses the state channel's credential it
// inherits from terraform against another object's state, and a credential kept from its
// previous run against its own. It writes what it found to $STASH/report (the sandbox's
// containers share the host's filesystem; the test reads the report there).
const probeModule = `apiVersion: v1
kind: ConfigMap
metadata:
  name: probe-module
data:
  main.tf: |
    variable "captf" {
      type = any
    }
    variable "generation" {
      type = number
    }
    variable "stash" {
      type = string
    }
    variable "other_path" {
      type = string
    }
    resource "terraform_data" "probe" {
      triggers_replace = [var.generation]
      provisioner "local-exec" {
        command = "sh ./probe.sh"
        environment = {
          STASH      = var.stash
          OTHER_PATH = var.other_path
        }
      }
    }
    output "control_plane_endpoint" {
      value = { host = "probe.example.internal", port = 6443 }
    }
  probe.sh: |
    set -u
    r="$STASH/report"
    for f in /var/run/secrets/kubernetes.io/serviceaccount/token /run/secrets/kubernetes.io/serviceaccount/token \
      /var/run/secrets/tokens "$HOME/.kube/config"; do
      if [ -e "$f" ]; then echo "found-file $f" >> "$r"; fi
    done
    for v in $(env | sed -n 's/^\(KUBE_[A-Z_]*\|KUBECONFIG\)=.*/\1/p'); do echo "found-env $v" >> "$r"; done
    if env | grep -q 'eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.'; then echo "found-jwt-in-env" >> "$r"; fi
    for d in "$PWD/.." "${TMPDIR:-/nonexistent}"; do
      find "$d" \( -name '*token*' -o -name 'kubeconfig*' -o -name 'credential' \) 2>/dev/null | sed 's/^/found-file /' >> "$r"
    done
    prefix="${TF_HTTP_ADDRESS%/*/*}"
    own=$(curl -s -o /dev/null -w '%{http_code}' -u "captf:$TF_HTTP_PASSWORD" "$TF_HTTP_ADDRESS")
    other=$(curl -s -o /dev/null -w '%{http_code}' -u "captf:$TF_HTTP_PASSWORD" "$prefix/$OTHER_PATH")
    echo "channel own=$own other=$other" >> "$r"
    if [ -s "$STASH/password" ]; then
      old=$(curl -s -o /dev/null -w '%{http_code}' -u "captf:$(cat "$STASH/password")" "$TF_HTTP_ADDRESS")
      echo "channel old-credential=$old" >> "$r"
    fi
    printf '%s' "$TF_HTTP_PASSWORD" > "$STASH/password"
    echo "done" >> "$r"
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: probe
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: probe
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformCluster
metadata:
  name: probe
  labels:
    cluster.x-k8s.io/cluster-name: probe
spec:
  module:
    configMap:
      name: probe-module
  variables:
    generation: 1
    stash: "@STASH@"
    other_path: "@OTHER_PATH@"
`

// The threat model of docs/runner.md, tried by module code on the sandbox.
var _ = Describe("a hostile module on the sandbox", func() {
	It("finds no Kubernetes credential, cannot read another object's state, and cannot reuse an earlier run's channel credential", func() {
		const ns = "isolation"
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", "victim", 0)
		eventuallyReady(sb, tc(ns, "victim"))

		stash := GinkgoT().TempDir()
		Expect(os.Chmod(stash, 0o777)).To(Succeed())
		// The victim's state on the same channel: its address with the last two path segments (the
		// namespace and the suffix of the probe's state) replaced.
		otherPath := ns + "/" + naming.StateSuffix(ns, infrav1.TerraformClusterKind, "victim")
		doc := strings.NewReplacer("@STASH@", stash, "@OTHER_PATH@", otherPath).Replace(probeModule)
		f := filepath.Join(GinkgoT().TempDir(), "probe.yaml")
		Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-n", ns, "-f", f)
		eventuallyReady(sb, tc(ns, "probe"))

		report := func() string {
			GinkgoHelper()
			b, err := os.ReadFile(filepath.Join(stash, "report"))
			Expect(err).NotTo(HaveOccurred(), "the probe ran and wrote its report")
			return string(b)
		}
		first := report()
		fmt.Fprintf(GinkgoWriter, "probe report (first run):\n%s", first)
		Expect(first).To(ContainSubstring("done"))
		Expect(first).NotTo(ContainSubstring("found-"), "module code found a Kubernetes credential")
		Expect(first).To(MatchRegexp(`channel own=(200|204) other=(403|404)\n`),
			"its own credential reaches its own state and nothing else")

		By("a second run: the first run's channel credential is refused")
		Expect(os.WriteFile(filepath.Join(stash, "report"), nil, 0o600)).To(Succeed())
		kubectl(sb, "patch", "-n", ns, "terraformcluster", "probe", "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
		Eventually(func() string { b, _ := os.ReadFile(filepath.Join(stash, "report")); return string(b) }).Should(ContainSubstring("done"))
		second := report()
		fmt.Fprintf(GinkgoWriter, "probe report (second run):\n%s", second)
		Expect(second).NotTo(ContainSubstring("found-"))
		Expect(second).To(MatchRegexp(`channel own=(200|204) other=(403|404)\n`))
		Expect(second).To(ContainSubstring("channel old-credential=401"))
		eventuallyReady(sb, tc(ns, "probe"))

		By("the victim's state is untouched and the probe's apply wrote only its own")
		Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, "victim").Serial).To(BeNumerically(">", 0))
	})
})
