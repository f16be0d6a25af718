package engine_test

import (
	"bytes"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
)

// The suite's manager keeps a state replica in a real S3-compatible store (versitygw), named by
// the flags' options and a Secret of the manager's namespace, as a platform would configure it.
const (
	replicaBucket = "captf-engine-states"
	replicaSecret = "state-replica"
	replicaKeyID  = "engine-key-1"
)

var (
	replicaStore *objectstore.Server
	replicaDir   string
	replicaKey   = bytes.Repeat([]byte{7}, 32)
)

// startReplicaStore starts the store and writes the manager's Secret; it returns the options
// the manager's flags would give.
func startReplicaStore() setup.ReplicaOptions {
	GinkgoHelper()
	root, err := envtest.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	replicaDir = GinkgoT().TempDir()
	replicaStore, err = objectstore.Start(ctx, objectstore.Options{Binary: filepath.Join(root, "bin", "versitygw"), Dir: replicaDir, Out: GinkgoWriter})

	Expect(err).NotTo(HaveOccurred(), "make test-bins builds bin/versitygw")
	DeferCleanup(func() { Expect(replicaStore.Stop()).To(Succeed()) })
	Expect(replicaStore.CreateBucket(ctx, replicaBucket)).To(Succeed())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: identityNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Fail(err.Error())
	}
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: identityNamespace, Name: replicaSecret},
		Data: map[string][]byte{
			setup.ReplicaAccessKeyIDKey: []byte(replicaStore.AccessKey), setup.ReplicaSecretAccessKeyKey: []byte(replicaStore.SecretKey),
			setup.ReplicaEncryptionKeyKey: replicaKey, setup.ReplicaEncryptionKeyIDKey: []byte(replicaKeyID),
		},
	})).To(Succeed())
	o := replicaStore.ReplicaOptions(replicaBucket)
	return setup.ReplicaOptions{Bucket: replicaBucket, Endpoint: o.Endpoint, Region: o.Region, PathStyle: true, Prefix: "engine/", Secret: replicaSecret}
}

// replicaReader opens the store the way a person with the bucket and the key would.
func replicaReader() *replica.Store {
	GinkgoHelper()
	b, err := replica.OpenS3(ctx, replicaStore.ReplicaOptions(replicaBucket))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(b.Close)
	k, err := replica.NewStaticKey(replicaKeyID, replicaKey)
	Expect(err).NotTo(HaveOccurred())
	s, err := replica.New(b, k, replica.Options{Prefix: "engine/"})
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("The state replica", func() {
	It("writes the state each Job leaves to the store; a store that is down never holds a run, and is caught up when it returns", func() {
		f := newFixture()
		tc := f.createCluster()
		ref := replica.Ref{Namespace: f.ns, Kind: infrav1.TerraformClusterKind, Name: tc.Name}
		reader := replicaReader()
		replicated := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReplicatedCondition) }

		By("the first apply's state reaches the store, sealed, with the object's identity")
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.11.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.StateReplicatedReason),
			HaveField("Message", ContainSubstring("serial 1"))))
		versions, err := reader.List(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(ConsistOf(HaveField("Serial", BeEquivalentTo(1))))
		held, err := reader.Get(ctx, versions[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(Equal(secretOf(f.ns, naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind))).Data["tfstate"]), "the store holds the state Secret's own bytes")

		By("the store goes down: the next apply runs and counts all the same, and the object says the replica is behind")
		port := replicaStore.Port()
		Expect(replicaStore.Stop()).To(Succeed())
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), clusterState(2, "10.11.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaUnavailableReason),
			HaveField("Message", ContainSubstring("serial 2"))))
		Expect(get(tc).Status.LastRun).To(HaveField("Outcome", infrav1.RunSucceeded))
		Eventually(func() any {
			return eventsOfType(f.ns, tc.Name, infrav1.StateNotReplicatedReason, corev1.EventTypeWarning)
		}).Should(
			ContainElement(HaveField("Note", ContainSubstring("serial 2"))))

		By("a new object created while the store is down: its first apply goes on, and a Warning event says the store was not checked")
		g := newFixture()
		fresh := g.createCluster()
		Expect(waitForJob(fresh, infrav1.TerraformClusterKind, 1).Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(eventsOfType(g.ns, fresh.Name, infrav1.ReplicaUncheckedReason, corev1.EventTypeWarning)).To(
			ContainElement(HaveField("Note", ContainSubstring("the first apply goes on"))))

		By("back on the same port and folder: the idle object's next pass catches up, in order")
		var errStart error
		replicaStore, errStart = objectstore.Start(ctx, objectstore.Options{Binary: replicaBinary(), Dir: replicaDir, Port: port,
			AccessKey: replicaStore.AccessKey, SecretKey: replicaStore.SecretKey, Out: GinkgoWriter})
		Expect(errStart).NotTo(HaveOccurred())
		// The object retries every minute (ReplicaRetry); a poke brings its next pass now.
		kit.Poke(tc)
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 2"))))
		versions, err = reader.List(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(HaveExactElements(HaveField("Serial", BeEquivalentTo(1)), HaveField("Serial", BeEquivalentTo(2))))
		Expect(eventsOfType(f.ns, tc.Name, infrav1.StateReplicatedReason, corev1.EventTypeNormal)).To(
			ContainElement(HaveField("Note", ContainSubstring("serial 2 reached the replica store again"))))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveEach(HaveField("ObjectMeta.Name", HaveSuffix("-2"))),
			"catching up runs no Job: the newest is still the second run's")

		By("and the next Job's states follow: one the state channel writes while the Job runs reaches the store before the Job ends")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		third := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(statetest.Write(ctx, k8s, f.ns, suffixOf(tc, infrav1.TerraformClusterKind), *clusterState(3, "10.11.0.1"))).To(Succeed())
		Eventually(func() ([]replica.Version, error) { return reader.List(ctx, ref) }).Should(HaveExactElements(
			HaveField("Serial", BeEquivalentTo(1)), HaveField("Serial", BeEquivalentTo(2)), HaveField("Serial", BeEquivalentTo(3))))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(ContainElement(And(HaveField("ObjectMeta.Name", third.Name),
			HaveField("Status.CompletionTime", BeNil()))), "the Job still runs")
		completeJob(third, clusterState(4, "10.11.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 4"))))
		versions, err = reader.List(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(HaveExactElements(HaveField("Serial", BeEquivalentTo(1)), HaveField("Serial", BeEquivalentTo(2)),
			HaveField("Serial", BeEquivalentTo(3)), HaveField("Serial", BeEquivalentTo(4))))
	})
})

var _ = Describe("Strict replication", func() {
	It("holds every run that writes the state while the store is down, and writes a version the store lacks before the next run starts", func() {
		f := newFixture()
		tc := f.createCluster()
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.StateReplication = infrav1.StateReplicationStrict })
		ref := replica.Ref{Namespace: f.ns, Kind: infrav1.TerraformClusterKind, Name: tc.Name}
		reader := replicaReader()
		replicated := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReplicatedCondition) }
		readable := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReadableCondition) }
		serials := func() []int64 {
			var out []int64
			for _, v := range get(tc).Status.StateReplica {
				out = append(out, v.Serial)
			}
			return out
		}
		restart := func(port int) {
			GinkgoHelper()
			var err error
			replicaStore, err = objectstore.Start(ctx, objectstore.Options{Binary: replicaBinary(), Dir: replicaDir, Port: port,
				AccessKey: replicaStore.AccessKey, SecretKey: replicaStore.SecretKey, Out: GinkgoWriter})
			Expect(err).NotTo(HaveOccurred())
		}

		By("the first apply's state is in the store, and the status lists what the store holds")
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.15.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 1"))))
		Eventually(serials).Should(Equal([]int64{1}))

		By("the store goes down: a change of inputs starts no Job, and the object says why")
		port := replicaStore.Port()
		Expect(replicaStore.Stop()).To(Succeed())
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		Eventually(readable).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaRequiredReason),
			HaveField("Message", And(ContainSubstring("spec.stateReplication is Strict"), ContainSubstring("cannot be listed")))))
		Expect(warningEvents(f.ns, tc.Name, infrav1.ReplicaRequiredReason)).To(Equal(1))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveEach(HaveField("ObjectMeta.Name", HaveSuffix("-1"))),
			"the held pass started no Job")

		By("the store returns: the apply starts, and its state reaches the store")
		restart(port)
		kit.Poke(tc)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), clusterState(2, "10.15.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 2"))))

		By("the store goes down while a run is on: the run's version misses the store, and the next run is held")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		third := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(replicaStore.Stop()).To(Succeed())
		completeJob(third, clusterState(3, "10.15.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaUnavailableReason),
			HaveField("Message", ContainSubstring("serial 3"))))
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":4}`)}
		})
		Eventually(readable).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaRequiredReason)))

		By("the store returns: the start writes serial 3 first, then the fourth run starts")
		restart(port)
		kit.Poke(tc)
		fourth := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		versions, err := reader.List(ctx, ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(HaveExactElements(HaveField("Serial", BeEquivalentTo(1)), HaveField("Serial", BeEquivalentTo(2)), HaveField("Serial", BeEquivalentTo(3))),
			"the version the run starts from is in the store when its Job exists")
		completeJob(fourth, clusterState(4, "10.15.0.1"), true, "")
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 4"))))
		Eventually(serials).Should(Equal([]int64{4, 3, 2, 1}), "status.stateReplica lists the store's versions, newest first")
		Eventually(readable).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

func replicaBinary() string {
	root, err := envtest.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(root, "bin", "versitygw")
}
