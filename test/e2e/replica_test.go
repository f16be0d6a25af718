package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
)

// docs/state.md, "The replica", with real Terraform: a sandbox whose manager keeps its state
// replica in a real S3-compatible store (sandbox.Options.StateReplicaDir).
var _ = Describe("The state replica on the sandbox", Ordered, func() {
	It("holds the state every Job left, sealed, findable with the bucket's tools and readable with the key", func() {
		const ns, name = "replica", "rep"
		dir := filepath.Join(GinkgoT().TempDir(), "replica")
		addr := "127.0.0.1:" + strconv.Itoa(obsFreePort())
		sb, err := sandbox.Start(ctx, sandbox.Options{
			Name: "replica", RepoRoot: repo, BinDir: binDir, ManagerArgs: []string{"--metrics-bind-address=" + addr},
			ManagerBinary: filepath.Join(built, "manager"), RunnerBinary: filepath.Join(built, "runner"),
			TerraformBinary: tf, WorkDir: filepath.Join(GinkgoT().TempDir(), "work"), StateReplicaDir: dir,
			ManagerOutput: GinkgoWriter, JobOutput: GinkgoWriter, Log: ctrl.Log.WithName("replica"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
		Expect(sb.Replica()).NotTo(BeNil())

		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		first := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReplicatedCondition) }).Should(And(Not(BeNil()),
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(first.Serial, 10)))))

		By("the runbook's commands list the object with its replication")
		docs := namespacedShell(sb, ns, buildPlugin())
		listed := docs.ok("docs/runbooks/CAPTFStateReplicaBehind.md", "kubectl get terraformclusters,terraformmachines,terraformmachinepools -A")
		Expect(listed).To(ContainSubstring(ns + "/" + name + "\t" + infrav1.StateReplicatedReason))
		docs.ok("docs/runbooks/CAPTFStateReplicaBehind.md", "kubectl get events -A --field-selector reason=StateNotReplicated")

		By("an input change: its apply's state follows")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
		Eventually(func() int64 { return stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial }).Should(BeNumerically(">", first.Serial))
		eventuallyReady(sb, o)
		second := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReplicatedCondition) }).Should(
			HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(second.Serial, 10))))

		By("the bucket's own tools: one object per version, the identity in the metadata, nothing readable")
		secret := &corev1.Secret{}
		Expect(sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}, secret)).To(Succeed())
		gz := secret.Data["tfstate"]
		s3c := sb.Replica().Client()
		list, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(sandbox.ReplicaBucket), Prefix: aws.String("states/" + ns + "/TerraformCluster/" + name + "/" + first.Lineage + "/")})
		Expect(err).NotTo(HaveOccurred())
		var keys []string
		for _, obj := range list.Contents {
			keys = append(keys, aws.ToString(obj.Key))
			got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(sandbox.ReplicaBucket), Key: obj.Key})
			Expect(err).NotTo(HaveOccurred())
			raw, err := io.ReadAll(got.Body)
			_ = got.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Metadata).To(And(HaveKeyWithValue("captf-namespace", ns), HaveKeyWithValue("captf-name", name),
				HaveKeyWithValue("captf-lineage", first.Lineage), HaveKey("captf-uid"), HaveKey("captf-serial")))
			_, gzErr := gzip.NewReader(bytes.NewReader(raw))
			Expect(gzErr).To(HaveOccurred(), "%s is not the state's gzip data", aws.ToString(obj.Key))
			Expect(bytes.Contains(raw, gz[len(gz)/2:len(gz)/2+32])).To(BeFalse(), "%s holds the state's bytes", aws.ToString(obj.Key))
		}
		Expect(keys).To(ContainElements(
			"states/"+ns+"/TerraformCluster/"+name+"/"+first.Lineage+"/"+padded(first.Serial)+".tfstate.sealed",
			"states/"+ns+"/TerraformCluster/"+name+"/"+first.Lineage+"/"+padded(second.Serial)+".tfstate.sealed"))

		By("with the key, the newest version is the state Secret's own bytes")
		key, err := os.ReadFile(filepath.Join(dir, sandbox.ReplicaKeyFile))
		Expect(err).NotTo(HaveOccurred())
		b, err := replica.OpenS3(ctx, sb.Replica().ReplicaOptions(sandbox.ReplicaBucket))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(b.Close)
		sealed, err := replica.NewStaticKey(sandbox.ReplicaSecret, key)
		Expect(err).NotTo(HaveOccurred())
		store, err := replica.New(b, sealed, replica.Options{})
		Expect(err).NotTo(HaveOccurred())
		versions, err := store.List(ctx, replica.Ref{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: name})
		Expect(err).NotTo(HaveOccurred())
		newest, ok := replica.Newest(versions, first.Lineage)
		Expect(ok).To(BeTrue())
		Expect(newest.Serial).To(Equal(second.Serial))
		held, err := store.Get(ctx, newest)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(Equal(gz))

		By("the store goes down: the next apply runs all the same, the condition and the alert's gauge say the replica is behind")
		behind := func() float64 {
			v, _ := obsValue(obsScrape("http://"+addr+"/metrics"), "captf_state_replica_behind", map[string]string{"kind": infrav1.TerraformClusterKind})
			return v
		}
		Expect(behind()).To(BeZero())
		port, access, secretKey := sb.Replica().Port(), sb.Replica().AccessKey, sb.Replica().SecretKey
		Expect(sb.Replica().Stop()).To(Succeed())
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":3}}}`)
		Eventually(func() int64 { return stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial }).Should(BeNumerically(">", second.Serial))
		eventuallyReady(sb, o)
		third := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReplicatedCondition) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaUnavailableReason),
			HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(third.Serial, 10)))))
		Expect(o.Status.LastRun).To(HaveField("Outcome", infrav1.RunSucceeded), "the apply ran and was counted while the store was down")
		Eventually(behind).Should(BeEquivalentTo(1))

		By("the store comes back on the same folder: the idle object catches up within its minute, and the newest version is the Secret's")
		back, err := objectstore.Start(ctx, objectstore.Options{Binary: filepath.Join(binDir, "versitygw"), Dir: filepath.Join(dir, "store"), Port: port,
			AccessKey: access, SecretKey: secretKey, Out: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(back.Stop)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReplicatedCondition) }, 3*time.Minute).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(third.Serial, 10)))))
		Eventually(behind).Should(BeZero())
		versions, err = store.List(ctx, replica.Ref{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: name})
		Expect(err).NotTo(HaveOccurred())
		newest, ok = replica.Newest(versions, first.Lineage)
		Expect(ok).To(BeTrue())
		Expect(newest.Serial).To(Equal(third.Serial))
		Expect(sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: secret.Name}, secret)).To(Succeed())
		held, err = store.Get(ctx, newest)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(Equal(secret.Data["tfstate"]))

		By("strict replication, asked for as docs/state.md shows: with the store down, a change of inputs starts no apply")
		docs.ok("docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"spec":{"stateReplication":"Strict"}}'`, "demo", name)
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		Expect(back.Stop()).To(Succeed())
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":4}}}`)
		readable := func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReadableCondition) }
		Eventually(readable).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaRequiredReason),
			HaveField("Message", And(ContainSubstring("spec.stateReplication is Strict"), ContainSubstring("cannot be listed")))))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies), "the held start ran no apply")
		Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial).To(Equal(third.Serial))

		By("the store returns: the apply runs within the minute the hold waits, and its state reaches the store")
		again, err := objectstore.Start(ctx, objectstore.Options{Binary: filepath.Join(binDir, "versitygw"), Dir: filepath.Join(dir, "store"), Port: port,
			AccessKey: access, SecretKey: secretKey, Out: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(again.Stop)
		Eventually(func() int64 { return stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial }, 3*time.Minute).Should(BeNumerically(">", third.Serial))
		eventuallyReady(sb, o)
		fourth := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReplicatedCondition) }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(fourth.Serial, 10)))))
		Eventually(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }).Should(Equal(applies+1), "the node's run history")

		By("the store holds a newer serial than the Secret (an etcd restored from an older backup, say): held, never taken on its own")
		ahead := fourth.Serial + 3
		Expect(sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: secret.Name}, secret)).To(Succeed())
		_, err = store.Put(ctx, replica.Version{Ref: replica.Ref{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: name}, UID: o.UID,
			Lineage: fourth.Lineage, Serial: ahead}, withSerial(secret.Data["tfstate"], ahead))
		Expect(err).NotTo(HaveOccurred())
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":5}}}`)
		Eventually(readable).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaAheadReason),
			HaveField("Message", ContainSubstring("serial "+strconv.FormatInt(ahead, 10)))))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 1))
		Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial).To(Equal(fourth.Serial), "the store's version was not taken")

		By("kubectl captf restore lists what the store holds, and restores the store's serial; the apply follows")
		shown := docs.ok("docs/state.md", "kubectl captf restore terraformcluster/demo", "demo", name)
		Expect(shown).To(ContainSubstring("In the replica store (as the controller last listed it):"))
		Expect(shown).To(MatchRegexp(`(?m)^%d\t%s\t`, ahead, fourth.Lineage))
		Expect(shown).To(MatchRegexp(`(?m)^%d\t%s\t`, fourth.Serial, fourth.Lineage))
		docs.ok("docs/state.md", "kubectl captf restore terraformcluster/demo --serial <serial> --yes", "demo", name, "<serial>", strconv.FormatInt(ahead, 10))
		Eventually(func() int64 { return stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial }, 3*time.Minute).Should(BeNumerically(">", ahead))
		eventuallyReady(sb, o)
		Eventually(readable).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(func() int { return countRuns(sb, ns, name, infrav1.OperationRestore) }).Should(Equal(1), "the node's run history")
		Eventually(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }).Should(Equal(applies+2), "the node's run history")
	})
})

// withSerial is a state as the backend's Secret holds it (gzip) with its serial set to serial.
func withSerial(gz []byte, serial int64) []byte {
	GinkgoHelper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	var doc map[string]any
	Expect(json.Unmarshal(raw, &doc)).To(Succeed())
	doc["serial"] = serial
	raw, err = json.Marshal(doc)
	Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err = zw.Write(raw)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	return out.Bytes()
}

func padded(serial int64) string {
	s := strconv.FormatInt(serial, 10)
	for len(s) < 20 {
		s = "0" + s
	}
	return s
}
