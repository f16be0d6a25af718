package e2e_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/tfregistry"
)

// worldLog reads the echo provider's record of what it did in the world folder: one
// "<verb> <file>" per create, update and delete.
func worldLog(world string) []string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(world, "world.log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(raw)), " ", "_"))
}

// echoRegistry starts the test's provider registry (its network mirror) with the echo provider
// in it, stopped when the spec ends; token and modules as tfregistry.Start takes them.
func echoRegistry(token string, modules ...tfregistry.Module) *tfregistry.Server {
	GinkgoHelper()
	reg, err := tfregistry.Start(GinkgoT().TempDir(), token, modules...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(reg.Close)
	echo, err := tfregistry.EchoProvider()
	Expect(err).NotTo(HaveOccurred())
	_, err = reg.AddProvider(echo)
	Expect(err).NotTo(HaveOccurred())
	return reg
}

// inWorld reports whether the echo provider's file exists in the world folder.
func inWorld(world, file string) bool {
	GinkgoHelper()
	_, err := os.Stat(filepath.Join(world, file))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

// A forgotten resource leaves the state and the inventory and stays in the world (docs/state.md,
// "Forgetting a resource"): the echo provider keeps each resource as a file and logs every
// create, update and delete, so the spec sees that neither the forget nor the object's destroy
// after it deleted the forgotten resource, while the destroy deleted the one still managed.
var _ = Describe("A forgotten resource in the world", func() {
	for _, b := range binaries {
		It("stays in the world after the forget and after the object's destroy, with "+b.product, func() {
			path, line, _ := binaryVersion(b)
			By("the Jobs run " + line)
			sb := shared
			if shared.TerraformBinary() != path {
				sb = startSandboxWith("fw-"+strings.ToLower(b.product), path)
				DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
			}
			ns, name := "forget-world-"+strings.ToLower(b.product), "fw"
			createNamespace(sb, ns)
			reg := echoRegistry("unused")
			world := GinkgoT().TempDir()

			By("the module keeps two files in the world: one apply creates both")
			raw, err := os.ReadFile(filepath.Join("testdata", "forgetworld.yaml"))
			Expect(err).NotTo(HaveOccurred())
			applyFixtureDoc(sb, ns, strings.NewReplacer("CLUSTER", name, "MIRROR_URL", reg.MirrorURL(), "REGISTRY_CA_FILE", reg.CAFile,
				"SOCKET_TMPDIR", GinkgoT().TempDir(), "WORLD", world).Replace(string(raw)))
			o := tc(ns, name)
			eventuallyReady(sb, o)
			Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"))
			Expect(stateAddresses(sb, ns, name)).To(ConsistOf("echo_file.network", "echo_file.node"))

			By("a forget of echo_file.node in one write with the module's next revision, which no longer declares it")
			var cm corev1.ConfigMap
			Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-module"}, &cm)).To(Succeed())
			nodeBlock := "resource \"echo_file\" \"node\" {\n  path    = \"" + world + "/node\"\n  content = \"node of ${var.captf.cluster_name}\"\n}\n"
			Expect(cm.Data["main.tf"]).To(ContainSubstring(nodeBlock))
			v2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-module-v2"},
				Data: map[string]string{"main.tf": strings.Replace(cm.Data["main.tf"], nodeBlock, "", 1)}}
			Expect(sb.Client().Create(ctx, v2)).To(Succeed())
			kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p",
				`{"metadata":{"annotations":{"captf.io/target-operation":"forget echo_file.node"}},"spec":{"module":{"configMap":{"name":"`+v2.Name+`"}}}}`)
			last := eventuallyAnswered(sb, o)
			Expect(last.Target).To(Equal("forget echo_file.node"))
			Expect(last.Outcome).To(Equal(infrav1.RunSucceeded))
			Expect(stateAddresses(sb, ns, name)).To(ConsistOf("echo_file.network"), "gone from the state")
			Eventually(func(g Gomega) {
				inv := inventoryOf(g, sb, ns, name)
				g.Expect(inv.Resources).NotTo(ContainElement(HaveField("Address", "echo_file.node")), "gone from the inventory")
				g.Expect(inv.Resources).To(ContainElement(HaveField("Address", "echo_file.network")))
			}).Should(Succeed())
			Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"), "the forget deleted nothing in the world")
			Expect(inWorld(world, "node")).To(BeTrue())

			By("the object's deletion destroys what it still manages, and leaves the forgotten resource in the world")
			kubectl(sb, "delete", "-n", ns, "cluster", name, "--wait=false")
			Eventually(func() bool {
				return apierrors.IsNotFound(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}))
			}).Should(BeTrue())
			Expect(worldLog(world)).To(ConsistOf("create_network", "create_node", "delete_network"))
			Expect(inWorld(world, "network")).To(BeFalse())
			Expect(inWorld(world, "node")).To(BeTrue(), "the forgotten resource outlives the object that forgot it")
		})
	}
})

// stateAddresses lists the resource addresses of the cluster's state.
func stateAddresses(sb target, ns, name string) []string {
	GinkgoHelper()
	st := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
	Expect(st).NotTo(BeNil())
	var out []string
	for _, r := range st.Resources {
		out = append(out, r.Type+"."+r.Name)
	}
	return out
}
