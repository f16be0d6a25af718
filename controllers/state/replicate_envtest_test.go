package state_test

import (
	"bytes"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gocloud.dev/blob/memblob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("the keeper and the replica store", func() {
	It("looks up the newest version of each lineage, tells an empty one and one that is not what its key says, and brings back only what is", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "replica-"}}
		Expect(k8s.Create(ctx, n)).To(Succeed())
		tc := objects.Cluster(n.Name, "c1").Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		kind := infrav1.TerraformClusterKind
		bucket := memblob.OpenBucket(nil)
		key, err := replica.NewStaticKey("k1", bytes.Repeat([]byte{3}, 32))
		Expect(err).NotTo(HaveOccurred())
		store, err := replica.New(bucket, key, replica.Options{})
		Expect(err).NotTo(HaveOccurred())
		k := &state.Keeper{Client: k8s, APIReader: k8s, Replica: store}
		s := state.Subject{Object: tc, Kind: kind, Suffix: naming.StateSuffix(n.Name, kind, tc.Name)}
		ref := replica.Ref{Namespace: n.Name, Kind: kind, Name: tc.Name}
		put := func(lineage string, serial int64, st statetest.State) []byte {
			GinkgoHelper()
			sec, err := statetest.Secret(n.Name, "x", st)
			Expect(err).NotTo(HaveOccurred())
			_, err = store.Put(ctx, replica.Version{Ref: ref, UID: types.UID("old-" + lineage), Lineage: lineage, Serial: serial}, sec.Data[state.StateKey])
			Expect(err).NotTo(HaveOccurred())
			return sec.Data[state.StateKey]
		}
		withResources := func(lineage string, serial uint64) statetest.State {
			st := statetest.Cluster("10.0.0.1", 6443)
			st.Lineage, st.Serial = lineage, serial
			return st
		}

		put("A", 1, withResources("A", 1))
		newest := put("A", 2, withResources("A", 2))
		empty := statetest.Destroyed()
		empty.Lineage, empty.Serial = "B", 3
		put("B", 3, empty)
		put("C", 4, withResources("C", 9)) // the key says serial 4; the state inside says 9

		lookup := k.LookupReplica(ctx, s)
		Expect(lookup.Problem).To(BeEmpty())
		Expect(lookup.Versions).To(HaveExactElements(
			And(HaveField("Lineage", "A"), HaveField("Serial", BeEquivalentTo(2)), HaveField("UID", "old-A"), HaveField("Empty", false), HaveField("Unopened", "")),
			And(HaveField("Lineage", "B"), HaveField("Serial", BeEquivalentTo(3)), HaveField("Empty", true), HaveField("Unopened", "")),
			And(HaveField("Lineage", "C"), HaveField("Serial", BeEquivalentTo(4)), HaveField("Unopened", ContainSubstring("not the key's")))))

		By("the newest version of A comes back as a protected backup owned by the object, byte for byte")
		b, err := k.ImportReplica(ctx, s, lookup.Versions[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(b).To(And(HaveField("Serial", BeEquivalentTo(2)), HaveField("Lineage", "A")))
		got := &corev1.Secret{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: n.Name, Name: naming.StateBackupSecretName(s.Suffix, 2)}, got)).To(Succeed())
		Expect(got.Data[state.StateKey]).To(Equal(newest))
		Expect(got.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
		Expect(got.OwnerReferences).To(ContainElement(HaveField("UID", tc.UID)))
		Expect(got.Annotations).To(HaveKeyWithValue(infrav1.BackupJobAnnotation, state.ReplicaBackupJob))
		view, ok := state.BackupOf(got)
		Expect(ok).To(BeTrue())
		Expect(view).To(And(HaveField("Serial", BeEquivalentTo(2)), HaveField("Lineage", "A")))

		By("a version whose state is not what its key says is never brought back")
		_, err = k.ImportReplica(ctx, s, decide.ReplicaVersionView{Lineage: "C", Serial: 4})
		Expect(err).To(MatchError(ContainSubstring("the state inside has lineage C and serial 9, not the key's")))
		err = k8s.Get(ctx, types.NamespacedName{Namespace: n.Name, Name: naming.StateBackupSecretName(s.Suffix, 4)}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no backup of serial 4: %v", err)

		By("a restore's lookup of one serial: found and read, absent, or not what its key says")
		one := &decide.ReplicaLookup{}
		k.LookupReplicaVersion(ctx, s, "A", 1, one)
		Expect(one.Requested).To(And(Not(BeNil()), HaveField("Lineage", "A"), HaveField("Serial", BeEquivalentTo(1)), HaveField("Unopened", "")))
		none := &decide.ReplicaLookup{}
		k.LookupReplicaVersion(ctx, s, "A", 7, none)
		Expect(none.Requested).To(BeNil())
		Expect(none.Problem).To(BeEmpty())
		odd := &decide.ReplicaLookup{}
		k.LookupReplicaVersion(ctx, s, "C", 4, odd)
		Expect(odd.Requested).To(HaveField("Unopened", ContainSubstring("not the key's")))

		By("a store that cannot be listed is a problem in the lookup, never an error")
		Expect(bucket.Close()).To(Succeed())
		Expect(k.LookupReplica(ctx, s).Problem).NotTo(BeEmpty())
	})
})
