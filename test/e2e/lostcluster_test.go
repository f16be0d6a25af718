package e2e_test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// conditionOfObject reads one condition of any CAPTF object (nil when it has none or is gone).
func conditionOfObject(sb target, o client.Object, t string) *metav1.Condition {
	if err := sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return nil
	}
	return meta.FindStatusCondition(terraformStatus(o).Conditions, t)
}

// docs/state.md, "Recovery into a new management cluster": the replica store outlives the
// management cluster. A Cluster with a machine is provisioned on a sandbox whose manager keeps
// its replica in a store over a folder; that sandbox stops and its data goes; a fresh sandbox on
// the same store gets the same manifests, as a person restoring from Git would apply them. The
// echo provider logs every create and delete of the world's files outside Terraform, so the
// spec counts what the infrastructure went through.
var _ = Describe(doccmd.SpecLostCluster, func() {
	It("a fresh management cluster on the same replica store holds the re-applied objects, recovers their states on the opt-in, creates nothing twice, and destroys each resource once", func() {
		const ns, name = "lost", "lost"
		dir := filepath.Join(GinkgoT().TempDir(), "replica")
		withReplica := func(o *sandbox.Options) { o.StateReplicaDir = dir }
		reg := echoRegistry("unused")
		world := GinkgoT().TempDir()
		raw, err := os.ReadFile(filepath.Join("testdata", "lostcluster.yaml"))
		Expect(err).NotTo(HaveOccurred())
		manifests := strings.NewReplacer("CLUSTER", name, "MIRROR_URL", reg.MirrorURL(), "REGISTRY_CA_FILE", reg.CAFile,
			"SOCKET_TMPDIR", GinkgoT().TempDir(), "WORLD", world).Replace(string(raw))
		cluster, machine := tc(ns, name), tm(ns, name+"-m0")

		By("the first management cluster provisions the Cluster and its machine; each state reaches the store")
		first := startSandboxWithManager("lost-first", tf, filepath.Join(built, "manager"), withReplica)
		stopped := false
		DeferCleanup(func() {
			if !stopped {
				Expect(first.Stop()).To(Succeed())
			}
		})
		createNamespace(first, ns)
		applyFixtureDoc(first, ns, manifests)
		eventuallyReady(first, cluster, machine)
		Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"))
		lineages, serials := map[string]string{}, map[string]int64{}
		for _, o := range []struct {
			kind string
			obj  client.Object
		}{{infrav1.TerraformClusterKind, cluster}, {infrav1.TerraformMachineKind, machine}} {
			st := stateOf(first, o.kind, ns, o.obj.GetName())
			lineages[o.kind], serials[o.kind] = st.Lineage, st.Serial
			Eventually(func() *metav1.Condition { return conditionOfObject(first, o.obj, infrav1.StateReplicatedCondition) }).Should(And(Not(BeNil()),
				HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(st.Serial, 10)))))
		}

		By("the management cluster is lost: its sandbox stops and its data goes with it")
		Expect(first.Stop()).To(Succeed())
		stopped = true

		By("a management cluster given the wrong key (a copy of the store, another key): held with a clear error, and the opt-in brings nothing back")
		wrong := filepath.Join(GinkgoT().TempDir(), "wrong-key")
		Expect(os.CopyFS(wrong, os.DirFS(dir))).To(Succeed())
		Expect(os.WriteFile(filepath.Join(wrong, sandbox.ReplicaKeyFile), bytes.Repeat([]byte{0x5a}, 32), 0o600)).To(Succeed())
		mistaken := startSandboxWithManager("lost-wrong-key", tf, filepath.Join(built, "manager"), func(o *sandbox.Options) { o.StateReplicaDir = wrong })
		mistakenStopped := false
		DeferCleanup(func() {
			if !mistakenStopped {
				Expect(mistaken.Stop()).To(Succeed())
			}
		})
		createNamespace(mistaken, ns)
		applyFixtureDoc(mistaken, ns, manifests)
		readable := func() *metav1.Condition { return conditionOfObject(mistaken, cluster, infrav1.StateReadableCondition) }
		Eventually(readable).Should(And(Not(BeNil()), HaveField("Reason", infrav1.ReplicaStateFoundReason),
			HaveField("Message", And(ContainSubstring(lineages[infrav1.TerraformClusterKind]), ContainSubstring("cannot read")))))
		kubectl(mistaken, "annotate", "-n", ns, "terraformcluster", name, infrav1.AdoptStateAnnotation+"="+lineages[infrav1.TerraformClusterKind])
		Eventually(readable).Should(HaveField("Message", ContainSubstring("The adopt opt-in names lineage "+lineages[infrav1.TerraformClusterKind])))
		Expect(jobsOf(mistaken, infrav1.TerraformClusterKind, ns, name, "")).To(BeEmpty(), "nothing runs with a key that cannot read the store")
		var backups corev1.SecretList
		Expect(mistaken.Client().List(ctx, &backups, client.InNamespace(ns), client.MatchingLabels{infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup})).To(Succeed())
		Expect(backups.Items).To(BeEmpty(), "nothing was brought back")
		Expect(mistaken.Stop()).To(Succeed())
		mistakenStopped = true
		Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"))

		By("a fresh management cluster on the same store, the same manifests applied: the TerraformCluster holds, nothing runs")
		second := startSandboxWithManager("lost-second", tf, filepath.Join(built, "manager"), withReplica)
		DeferCleanup(func() { Expect(second.Stop()).To(Succeed()) })
		createNamespace(second, ns)
		applyFixtureDoc(second, ns, manifests)
		held := func(kind string, o client.Object) {
			GinkgoHelper()
			Eventually(func() *metav1.Condition { return conditionOfObject(second, o, infrav1.StateReadableCondition) }).Should(And(Not(BeNil()),
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaStateFoundReason),
				HaveField("Message", ContainSubstring(lineages[kind]))))
			Expect(jobsOf(second, kind, ns, o.GetName(), "")).To(BeEmpty(), "%s %s: nothing runs while it holds", kind, o.GetName())
		}
		held(infrav1.TerraformClusterKind, cluster)
		Expect(jobsOf(second, infrav1.TerraformMachineKind, ns, machine.GetName(), "")).To(BeEmpty(), "the machine waits for its cluster")
		Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"))

		By("docs/state.md's commands: the hold's message names the lineage, the opt-in names it back; the cluster's state comes back and is restored")
		docs := namespacedShell(second, ns)
		const page = "docs/state.md"
		said := docs.ok(page, `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="StateReadable")].message}'`, "demo", name)
		Expect(said).To(And(ContainSubstring(lineages[infrav1.TerraformClusterKind]), ContainSubstring(infrav1.AdoptStateAnnotation)))
		docs.ok(page, "kubectl annotate terraformcluster demo captf.io/adopt-state=", "demo", name, "<lineage>", lineages[infrav1.TerraformClusterKind])
		eventuallyReady(second, cluster)

		By("the machine, its cluster ready, finds its own state in the store and holds the same way; its opt-in brings it back")
		held(infrav1.TerraformMachineKind, machine)
		docs.ok(page, "kubectl annotate terraformmachine demo-m0 captf.io/adopt-state=", "demo", name, "<lineage>", lineages[infrav1.TerraformMachineKind])
		eventuallyReady(second, machine)

		By("each object was restored and runs on its old state; nothing was created twice; the Cluster's infrastructure is ready")
		for kind, o := range map[string]client.Object{infrav1.TerraformClusterKind: cluster, infrav1.TerraformMachineKind: machine} {
			Expect(jobsOf(second, kind, ns, o.GetName(), infrav1.OperationRestore)).NotTo(BeEmpty(), "%s %s was restored", kind, o.GetName())
			Expect(stateOf(second, kind, ns, o.GetName()).Lineage).To(Equal(lineages[kind]), "%s %s runs on its old state", kind, o.GetName())
		}
		Expect(worldLog(world)).To(ConsistOf("create_network", "create_node"), "nothing created twice")
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(second.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition)).To(BeTrue())
		}).Should(Succeed())

		By("deleting the Cluster destroys each resource once")
		kubectl(second, "delete", "-n", ns, "cluster", name, "--wait=false")
		for _, o := range []client.Object{machine, cluster} {
			Eventually(func() bool { return apierrors.IsNotFound(second.Client().Get(ctx, client.ObjectKeyFromObject(o), o)) }).Should(BeTrue())
		}
		Expect(worldLog(world)).To(ConsistOf("create_network", "create_node", "delete_network", "delete_node"))

		By("the store keeps every version after the deletion: CAPTF never deletes one")
		for kind, o := range map[string]client.Object{infrav1.TerraformClusterKind: cluster, infrav1.TerraformMachineKind: machine} {
			list, err := second.Replica().Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(sandbox.ReplicaBucket),
				Prefix: aws.String("states/" + ns + "/" + kind + "/" + o.GetName() + "/" + lineages[kind] + "/")})
			Expect(err).NotTo(HaveOccurred())
			var held []int64
			for _, obj := range list.Contents {
				n, err := strconv.ParseInt(strings.TrimSuffix(path.Base(aws.ToString(obj.Key)), ".tfstate.sealed"), 10, 64)
				Expect(err).NotTo(HaveOccurred())
				held = append(held, n)
			}
			Expect(held).To(And(ContainElement(serials[kind]), ContainElement(BeNumerically(">", serials[kind]))),
				"%s %s: the lost cluster's version and the destroy's newer one", kind, o.GetName())
		}
	})
})
