package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/registry"
)

// imageModule is the module the image ships under its working directory: no provider to
// download (terraform_data is built in), the contract's endpoint output.
var imageModule = map[string]string{"modules/cluster/main.tf": `
variable "captf" {
  type = any
}

resource "terraform_data" "network" {
  input = "${var.captf.namespace}/${var.captf.cluster_name}"
}

output "control_plane_endpoint" {
  value = {
    host = "${var.captf.cluster_name}.${var.captf.namespace}.example.internal"
    port = 6443
  }
}
`}

// pushModuleImage builds an image FROM a terraform or tofu image (its program is program) that
// holds imageModule, and pushes it to the sandbox's registry.
func pushModuleImage(sb *sandbox.Sandbox, repo, program string) string {
	GinkgoHelper()
	img, err := registry.ModuleImage{WorkingDir: "/workspace", Program: program, Files: imageModule}.Build()
	Expect(err).NotTo(HaveOccurred())
	ref, err := sb.Registry().Push(ctx, repo, "v1", img)
	Expect(err).NotTo(HaveOccurred())
	return ref
}

// applyImageFixture applies testdata/image.yaml into ns with the given image and password.
func applyImageFixture(sb *sandbox.Sandbox, ns, cluster, image, password string) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", "image.yaml"))
	Expect(err).NotTo(HaveOccurred())
	reg := sb.Registry()
	doc := strings.NewReplacer("REGISTRY", reg.Host(), "USERNAME", reg.Username(), "PASSWORD", password,
		"IMAGE", image, "CLUSTER", cluster).Replace(string(raw))
	f := filepath.Join(GinkgoT().TempDir(), "image.yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}

// applyCondition is the object's ApplyJobSucceeded condition.
func applyCondition(g Gomega, sb target, o client.Object) *metav1.Condition {
	g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	c := meta.FindStatusCondition(terraformStatus(o).Conditions, infrav1.ApplyJobSucceededCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// warningNotes are the notes of the Warning events with the reason about an object.
func warningNotes(sb target, ns, name, reason string) []string {
	GinkgoHelper()
	var list eventsv1.EventList
	Expect(sb.Client().List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Note)
		}
	}
	return out
}

// hostVersion is the version the host program name (which stands for the image's) reports.
func hostVersion(name string) string {
	GinkgoHelper()
	prog := sandbox.FindImagePrograms(binDir)[name]
	Expect(prog).NotTo(BeEmpty(), "no host %s", name)
	out, err := exec.Command(prog, "version", "-json").Output()
	Expect(err).NotTo(HaveOccurred())
	var v struct {
		Version string `json:"terraform_version"`
	}
	Expect(json.Unmarshal(out, &v)).To(Succeed())
	return v.Version
}

// Image modules from the sandbox's registry (docs/production.md, "Image modules from a private
// registry"), with real OpenTofu and real Terraform.
var _ = Describe("Image modules from a private registry", func() {
	for _, program := range []string{"tofu", "terraform"} {
		It("applies and destroys an image module pulled with the ServiceAccount's pull secret, after reporting a wrong one with the registry's reason ("+program+")", func() {
			sb := shared
			ns, cluster := "image-"+program, "img"
			createNamespace(sb, ns)
			stop := watchInvariants(sb, ns)
			defer stop()
			image := pushModuleImage(sb, "modules/"+program+"-cluster", program)
			obj := tc(ns, cluster)

			By("a wrong password: ApplyJobSucceeded=False, ImagePullFailed, the registry's answer, a Warning event")
			applyImageFixture(sb, ns, cluster, image, "wrong")
			Eventually(func(g Gomega) {
				c := applyCondition(g, sb, obj)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(infrav1.ImagePullFailedReason))
				g.Expect(c.Message).To(And(ContainSubstring(image), ContainSubstring("UNAUTHORIZED"),
					ContainSubstring("wrong username or password")))
			}).Should(Succeed())
			Expect(strings.TrimSpace(kubectl(sb, "get", "terraformcluster", cluster, "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="ApplyJobSucceeded")].reason}`))).To(Equal(infrav1.ImagePullFailedReason))
			Eventually(func() []string { return warningNotes(sb, ns, cluster, infrav1.ImagePullFailedReason) }).Should(ContainElement(ContainSubstring("wrong username or password")))
			apply := jobsOf(sb, infrav1.TerraformClusterKind, ns, cluster, infrav1.OperationApply)
			Expect(apply).To(HaveLen(1))
			var pods corev1.PodList
			Expect(sb.Client().List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: apply[0].Name})).To(Succeed())
			Expect(pods.Items).To(HaveLen(1))
			Expect(pods.Items[0].Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "registry-pull"}),
				"the ServiceAccount admission plugin copied the account's pull secrets into the pod")
			Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodPending))

			By("the secret fixed with kubectl: the same Job runs, the object is Ready")
			secret := kubectl(sb, "create", "secret", "docker-registry", "registry-pull", "-n", ns, "--docker-server="+sb.Registry().Host(),
				"--docker-username="+sb.Registry().Username(), "--docker-password="+sb.Registry().Password(), "--dry-run=client", "-o", "yaml")
			f := filepath.Join(GinkgoT().TempDir(), "secret.yaml")
			Expect(os.WriteFile(f, []byte(secret), 0o600)).To(Succeed())
			kubectl(sb, "apply", "-n", ns, "-f", f)
			eventuallyReady(sb, obj)
			Expect(jobsOf(sb, infrav1.TerraformClusterKind, ns, cluster, infrav1.OperationApply)).To(ConsistOf(
				HaveField("Name", apply[0].Name)), "the pending Job healed; no second apply")
			Expect(applyCondition(Default, sb, obj)).To(HaveField("Reason", infrav1.JobSucceededReason))
			st := stateOf(sb, infrav1.TerraformClusterKind, ns, cluster)
			Expect(st).NotTo(BeNil())
			Expect(st.TerraformVersion).To(Equal(hostVersion(program)), "the host %s stood in for the image's", program)
			Expect(st.Resources).To(ContainElement(And(HaveField("Type", "terraform_data"), HaveField("Name", "network"))))
			Expect(obj.Spec.ControlPlaneEndpoint.Host).To(Equal(cluster + "." + ns + ".example.internal"))

			By("kubectl delete cluster: a destroy Job from the same image, then nothing is left")
			kubectl(sb, "delete", "cluster", cluster, "-n", ns, "--wait=false")
			Eventually(func() bool {
				return sb.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj) != nil
			}).Should(BeTrue())
			destroys := runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, cluster, infrav1.OperationDestroy)
			Expect(destroys).To(ConsistOf(HaveField("ExitCode", BeEquivalentTo(0))))
			Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, cluster)).To(BeNil())
		})
	}

	It("reports the registry's refusal of a pod without a pull secret, and the Job fails at its deadline", func() {
		sb := shared
		ns, cluster := "image-nosecret", "img"
		createNamespace(sb, ns)
		image := pushModuleImage(sb, "modules/nosecret", "tofu")
		// The object's own runner account carries no pull secret.
		applyFixtureDoc(sb, ns, strings.NewReplacer("CLUSTER", cluster, "IMAGE", image).Replace(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: CLUSTER
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: CLUSTER
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformCluster
metadata:
  name: CLUSTER
  labels:
    cluster.x-k8s.io/cluster-name: CLUSTER
spec:
  module:
    image: IMAGE
    path: modules/cluster
  job:
    activeDeadlineSeconds: 60
`))
		obj := tc(ns, cluster)
		var first string
		Eventually(func(g Gomega) {
			c := applyCondition(g, sb, obj)
			g.Expect(c.Reason).To(Equal(infrav1.ImagePullFailedReason))
			g.Expect(c.Message).To(ContainSubstring("no credentials"))
			g.Expect(obj.Status.ActiveJob).NotTo(BeNil())
			first = obj.Status.ActiveJob.Name
		}).Should(Succeed())
		By("the Job controller stops the Job at its deadline: CAPTF records the run as interrupted, never counts it toward the backoff, and starts the next apply at once")
		// The ApplyJobSucceeded condition says JobFailed only for the moment between this
		// bookkeeping and the next pass, so the spec reads what stays: status.lastRun, the
		// Warning event, the failure count and the next Job's pull failure.
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			last := obj.Status.LastRun
			g.Expect(last).NotTo(BeNil())
			g.Expect(last.Job).To(Equal(first))
			g.Expect(last.Outcome).To(Equal(infrav1.RunInterrupted))
			g.Expect(last.Message).To(ContainSubstring("deadline"))
		}, 3*time.Minute).Should(Succeed())
		Eventually(func() []string { return warningNotes(sb, ns, cluster, "JobFailed") }).Should(
			ContainElement(And(ContainSubstring(first), ContainSubstring("interrupted"))))
		Eventually(func(g Gomega) {
			c := applyCondition(g, sb, obj)
			g.Expect(c.Reason).To(Equal(infrav1.ImagePullFailedReason))
			g.Expect(c.Message).NotTo(ContainSubstring(first), "the condition names the retry's Job")
		}).Should(Succeed())
		// Read after the retry started, so the first Job's bookkeeping has landed whole.
		Expect(obj.Annotations).NotTo(HaveKey(infrav1.FailuresAnnotation), "an interruption is not a failure of the module")
		By("deleted while the retry's pod waits for its image: the deletion waits for that Job (its deadline), then the object goes")
		kubectl(sb, "delete", "cluster", cluster, "-n", ns, "--wait=false")
		Eventually(func() bool { return sb.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj) != nil }, 3*time.Minute).Should(BeTrue())
		runs := runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, cluster, "")
		Expect(runs).NotTo(BeEmpty())
		Expect(runs).To(HaveEach(And(HaveField("Operation", string(infrav1.OperationApply)), HaveField("ExitCode", BeEquivalentTo(-1)))),
			"no runner ever ran: nothing was applied, and no destroy ran")
	})
})

// applyFixtureDoc applies a YAML document into ns with kubectl.
func applyFixtureDoc(sb target, ns, doc string) {
	GinkgoHelper()
	f := filepath.Join(GinkgoT().TempDir(), "fixture.yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}
