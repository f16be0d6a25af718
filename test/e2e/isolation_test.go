package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/registry"
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
    # The options of the spec reached the module (names only, never a value).
    [ -n "${TF_CLI_CONFIG_FILE:-}" ] && [ -s "$TF_CLI_CONFIG_FILE" ] && echo "option cli-config" >> "$r"
    [ -n "${TF_TOKEN_registry_example_internal:-}" ] && echo "option registry-token" >> "$r"
    [ -n "${PROBE_CLOUD_KEY:-}" ] && echo "option identity" >> "$r"
    [ -s "${PROBE_CA_FILE:-/nonexistent}" ] && echo "option ca-volume" >> "$r"
    [ -s "${PROBE_SETTINGS_FILE:-/nonexistent}" ] && echo "option secret-volume" >> "$r"
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
  job:
    env:
    - name: PROBE_CA_FILE
      value: /etc/probe/ca/ca.pem
    - name: PROBE_SETTINGS_FILE
      value: /etc/probe/settings/settings.json
    identityRef:
      name: probe-identity
    cliConfig:
      configMapRef:
        name: probe-terraform-cli
        key: config.tfrc
      credentials:
      - host: registry.example.internal
        secretKeyRef:
          name: probe-registry-credential
          key: token
    podTemplate:
      metadata:
        labels:
          example.com/team: probe
        annotations:
          example.com/owner: probe
      tolerations:
      - key: example.com/dedicated
        operator: Exists
        effect: NoSchedule
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 1
            preference:
              matchExpressions:
              - key: example.com/runner-pool
                operator: In
                values: ["infra"]
      priorityClassName: probe-runner
      imagePullSecrets:
      - name: probe-pull
      volumes:
      - name: ca
        mountPath: /etc/probe/ca
        configMap:
          name: probe-ca
      - name: settings
        mountPath: /etc/probe/settings
        secret:
          name: probe-settings
`

// probeOptions is what the probe's spec names besides its module: every option of the
// module supply chain (docs/production.md) the hostile module runs with. The identity's
// Secret lives in the manager's namespace; the rest in the probe's.
const probeOptions = `apiVersion: v1
kind: ConfigMap
metadata:
  name: probe-terraform-cli
  labels:
    captf.io/variables: "true"
data:
  config.tfrc: |
    disable_checkpoint = true
---
apiVersion: v1
kind: Secret
metadata:
  name: probe-registry-credential
  labels:
    captf.io/variables: "true"
stringData:
  token: a-registry-credential
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: probe-ca
data:
  ca.pem: "not a certificate, only bytes to read"
---
apiVersion: v1
kind: Secret
metadata:
  name: probe-settings
  labels:
    captf.io/variables: "true"
stringData:
  settings.json: '{"region": "example"}'
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: probe-runner
value: 1000
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformIdentity
metadata:
  name: probe-identity
spec:
  env:
  - name: PROBE_CLOUD_KEY
    secretKeyRef:
      name: probe-identity
      key: key
  allowedNamespaces:
    list: ["isolation", "isolation-image"]
`

// The threat model of docs/runner.md, tried by module code on the sandbox: once as a ConfigMap
// module, once as an image module pulled with the pod template's pull secret.
var _ = Describe("a hostile module on the sandbox", func() {
	It("finds no Kubernetes credential, cannot read another object's state, and cannot reuse an earlier run's channel credential", func() {
		runProbe(shared, "isolation", func(doc string) string { return doc })
	})

	It("does the same as an image module pulled from the sandbox's registry with the pod template's pull secret", func() {
		const ns = "isolation-image"
		sb := shared
		// The probe's files, from the ConfigMap the first spec mounts, in an image.
		var cm corev1.ConfigMap
		Expect(yaml.Unmarshal([]byte(strings.SplitN(probeModule, "\n---\n", 2)[0]), &cm)).To(Succeed())
		Expect(cm.Data).To(HaveKey("probe.sh"))
		img, err := registry.ModuleImage{WorkingDir: "/workspace", Program: "terraform", Files: cm.Data}.Build()
		Expect(err).NotTo(HaveOccurred())
		image, err := sb.Registry().Push(ctx, "modules/probe", "v1", img)
		Expect(err).NotTo(HaveOccurred())
		const configMapModule = "  module:\n    configMap:\n      name: probe-module\n"
		runProbe(sb, ns, func(doc string) string {
			Expect(doc).To(ContainSubstring(configMapModule))
			return strings.Replace(doc, configMapModule, "  module:\n    image: "+image+"\n", 1)
		})
		applies := jobsOf(sb, infrav1.TerraformClusterKind, ns, "probe", infrav1.OperationApply)
		Expect(applies).NotTo(BeEmpty())
		Expect(applies[0].Spec.Template.Spec.Containers).To(ContainElement(And(HaveField("Name", jobs.MainContainer), HaveField("Image", image))),
			"the probe ran as the image module")
	})
})

// runProbe runs the hostile probe in ns with every option of docs/production.md set: it applies
// a victim, the options (probeOptions; the pull Secret probe-pull then holds the sandbox
// registry's credentials) and the probe, with module rewriting the probe's documents; then it
// reads the probe's reports of two runs.
func runProbe(sb *sandbox.Sandbox, ns string, module func(doc string) string) {
	GinkgoHelper()
	createNamespace(sb, ns)
	applyFixture(sb, ns, "cluster.yaml", "victim", 0)
	eventuallyReady(sb, tc(ns, "victim"))

	stash := GinkgoT().TempDir()
	Expect(os.Chmod(stash, 0o777)).To(Succeed())
	// The victim's state on the same channel: its address with the last two path segments (the
	// namespace and the suffix of the probe's state) replaced.
	otherPath := ns + "/" + naming.StateSuffix(ns, infrav1.TerraformClusterKind, "victim")
	doc := module(strings.NewReplacer("@STASH@", stash, "@OTHER_PATH@", otherPath).Replace(probeModule))
	f := filepath.Join(GinkgoT().TempDir(), "probe.yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	By("the probe runs with every option of docs/production.md set: a pod template, a CLI configuration with a registry token, a scoped identity")
	applyProbeOptions(sb, ns)
	kubectl(sb, "apply", "-n", ns, "-f", f)
	eventuallyReady(sb, tc(ns, "probe"))
	expectEveryOption(sb, ns)

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
	for _, o := range []string{"cli-config", "registry-token", "identity", "ca-volume", "secret-volume"} {
		Expect(first).To(ContainSubstring("option "+o+"\n"), "the option reached the module")
	}

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
}

// applyProbeOptions applies probeOptions into ns: the identity allows both namespaces of the
// specs above, its Secret in the manager's namespace is applied (not created) so either spec
// may run first, and the pull Secret probe-pull holds the sandbox registry's credentials.
func applyProbeOptions(sb *sandbox.Sandbox, ns string) {
	GinkgoHelper()
	applyFixtureDoc(sb, sandbox.ManagerNamespace, kubectl(sb, "create", "secret", "generic", "probe-identity", "-n", sandbox.ManagerNamespace,
		"--from-literal=key=a-cloud-credential", "--dry-run=client", "-o", "yaml"))
	applyFixtureDoc(sb, ns, probeOptions)
	reg := sb.Registry()
	applyFixtureDoc(sb, ns, kubectl(sb, "create", "secret", "docker-registry", "probe-pull", "-n", ns, "--docker-server="+reg.Host(),
		"--docker-username="+reg.Username(), "--docker-password="+reg.Password(), "--dry-run=client", "-o", "yaml"))
}

// expectEveryOption checks on the probe's apply Job that every option is on, and that none of
// them reaches a container but terraform: the pod's placement, labels, annotations and pull
// Secret; the CLI configuration, the registry token, the identity's variable and the two
// volumes in the main container alone.
func expectEveryOption(sb target, ns string) {
	GinkgoHelper()
	applies := jobsOf(sb, infrav1.TerraformClusterKind, ns, "probe", infrav1.OperationApply)
	Expect(applies).NotTo(BeEmpty())
	pod := applies[0].Spec.Template
	Expect(pod.Labels).To(HaveKeyWithValue("example.com/team", "probe"))
	Expect(pod.Annotations).To(HaveKeyWithValue("example.com/owner", "probe"))
	Expect(pod.Spec.Tolerations).To(ContainElement(HaveField("Key", "example.com/dedicated")))
	Expect(pod.Spec.Affinity).NotTo(BeNil())
	Expect(pod.Spec.PriorityClassName).To(Equal("probe-runner"))
	Expect(pod.Spec.ImagePullSecrets).To(ContainElement(HaveField("Name", "probe-pull")))
	optionEnv := []string{"TF_CLI_CONFIG_FILE", "TF_TOKEN_registry_example_internal", "PROBE_CLOUD_KEY"}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		var env, mounts []string
		for _, e := range c.Env {
			env = append(env, e.Name)
		}
		for _, m := range c.VolumeMounts {
			mounts = append(mounts, m.MountPath)
		}
		if c.Name == jobs.MainContainer {
			Expect(env).To(ContainElements(optionEnv), c.Name)
			Expect(mounts).To(ContainElements("/etc/probe/ca", "/etc/probe/settings"), c.Name)
			continue
		}
		for _, e := range optionEnv {
			Expect(env).NotTo(ContainElement(e), c.Name)
		}
		Expect(mounts).NotTo(ContainElement("/etc/probe/ca"), c.Name)
		Expect(mounts).NotTo(ContainElement("/etc/probe/settings"), c.Name)
	}
}
