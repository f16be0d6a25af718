package engine_test

import (
	"bytes"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// Recovery into a new management cluster (docs/state.md): the store holds states written by
// objects of another management cluster (another UID); the suite runs no webhook, so the adopt
// opt-in is set directly (the webhook suite proves only the override groups may set it).

const lostClusterUID = "uid-of-the-lost-management-clusters-object"

// putInStore writes st into the store as the version a lost management cluster's object of
// kind/name in ns left, and returns the backend bytes written.
func putInStore(store *replica.Store, ns, kind, name string, st statetest.State) []byte {
	GinkgoHelper()
	sec, err := statetest.Secret(ns, "unused", st)
	Expect(err).NotTo(HaveOccurred())
	data := sec.Data[state.StateKey]
	_, err = store.Put(ctx, replica.Version{Ref: replica.Ref{Namespace: ns, Kind: kind, Name: name}, UID: lostClusterUID,
		Lineage: st.Lineage, Serial: int64(st.Serial)}, data)
	Expect(err).NotTo(HaveOccurred())
	return data
}

var _ = Describe("Recovery from the state replica", func() {
	kind := infrav1.TerraformClusterKind

	It("holds a new object whose name the store holds a state for, and on the adopt opt-in brings it back and restores it", func() {
		f := newFixture()
		lineage := "5e0c7a11-0000-4000-8000-000000000001"
		held := *clusterState(5, "10.12.0.1")
		held.Lineage = lineage
		data := putInStore(replicaReader(), f.ns, kind, f.cluster, held)

		tc := f.createCluster()
		readable := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReadableCondition) }
		Eventually(readable).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaStateFoundReason),
			HaveField("Message", And(ContainSubstring(lineage), ContainSubstring("serial 5"), ContainSubstring(lostClusterUID), ContainSubstring(infrav1.AdoptStateAnnotation)))))
		Expect(warningEvents(f.ns, tc.Name, infrav1.ReplicaStateFoundReason)).To(Equal(1), "the hold's beginning is said once")
		Expect(kit.JobsOf(tc, kind)).To(BeEmpty(), "nothing runs: a first apply would create the infrastructure a second time")

		By("the adopt opt-in naming that lineage: the version comes back as a protected backup of this object, and its restore runs")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.AdoptStateAnnotation] = lineage })
		restore := waitForJob(tc, kind, 1)
		Expect(restore.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationRestore)))
		suffix := suffixOf(tc, kind)
		backup := secretOf(f.ns, naming.StateBackupSecretName(suffix, 5))
		Expect(backup.Data[state.StateKey]).To(Equal(data), "the backup holds the store's version as the backend wrote it")
		Expect(backup.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
		Expect(backup.OwnerReferences).To(ContainElement(HaveField("UID", get(tc).UID)))
		Expect(backup.Annotations).To(And(HaveKeyWithValue(infrav1.BackupLineageAnnotation, lineage), HaveKeyWithValue(infrav1.BackupJobAnnotation, state.ReplicaBackupJob)))
		Expect(eventsOfType(f.ns, tc.Name, infrav1.ReplicaImportedReason, corev1.EventTypeNormal)).To(
			ContainElement(HaveField("Note", And(ContainSubstring("serial 5"), ContainSubstring(lostClusterUID)))))
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunSecretName(restore.Name)}, s)).To(Succeed())
			g.Expect(s.Data).To(HaveKey("restore.tfstate"))
		}).Should(Succeed())
		completeJob(restore, &held, true, "")

		By("the restored lineage is the object's own, the opt-in is spent, and the next apply runs on that state")
		Eventually(func() map[string]string { return get(tc).Annotations }).Should(And(HaveKeyWithValue(infrav1.StateLineageAnnotation, lineage),
			Not(HaveKey(infrav1.AdoptStateAnnotation)), Not(HaveKey(infrav1.RestoreStateAnnotation))))
		apply := waitForJob(tc, kind, 2)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		next := *clusterState(6, "10.12.0.1")
		next.Lineage = lineage
		completeJob(apply, &next, true, "")
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReplicatedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 6"))))
		Eventually(readable).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("applies anew where the store's newest version is a destroy's empty state, and never brings back a version its key cannot open", func() {
		By("a name whose last state in the store tracks nothing: the first apply runs")
		f := newFixture()
		gone := statetest.Destroyed()
		gone.Serial, gone.Lineage = 9, "5e0c7a11-0000-4000-8000-000000000002"
		putInStore(replicaReader(), f.ns, kind, f.cluster, gone)
		tc := f.createCluster()
		Expect(waitForJob(tc, kind, 1).Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))

		By("a name whose version was sealed with another key: held, and the opt-in brings nothing back")
		g := newFixture()
		other, err := replica.NewStaticKey("another-key", bytes.Repeat([]byte{9}, 32))
		Expect(err).NotTo(HaveOccurred())
		b, err := replica.OpenS3(ctx, replicaStore.ReplicaOptions(replicaBucket))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(b.Close)
		foreign, err := replica.New(b, other, replica.Options{Prefix: "engine/"})
		Expect(err).NotTo(HaveOccurred())
		sealed := *clusterState(4, "10.12.0.2")
		sealed.Lineage = "5e0c7a11-0000-4000-8000-000000000003"
		putInStore(foreign, g.ns, kind, g.cluster, sealed)
		tc2 := g.createCluster()
		readable := func() *metav1.Condition { return envtest.Condition(get(tc2), infrav1.StateReadableCondition) }
		Eventually(readable).Should(And(HaveField("Reason", infrav1.ReplicaStateFoundReason),
			HaveField("Message", And(ContainSubstring(sealed.Lineage), ContainSubstring("cannot read"), ContainSubstring("another-key")))))
		update(tc2, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.AdoptStateAnnotation] = sealed.Lineage })
		Eventually(readable).Should(And(HaveField("Reason", infrav1.ReplicaStateFoundReason),
			HaveField("Message", ContainSubstring("The adopt opt-in names lineage "+sealed.Lineage))))
		Expect(kit.JobsOf(tc2, kind)).To(BeEmpty())
		Expect(secretExists(g.ns, naming.StateBackupSecretName(suffixOf(tc2, kind), 4))).To(BeFalse(), "nothing was brought back")
	})

	It("restores a serial of the object's own lineage that only the store still holds, and refuses one it does not hold", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, kind)
		completeJob(waitForJob(tc, kind, 1), clusterState(1, "10.13.0.1"), true, "")
		replicated := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReplicatedCondition) }
		Eventually(replicated).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 1"))))
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		completeJob(waitForJob(tc, kind, 2), clusterState(2, "10.13.0.2"), true, "")
		Eventually(replicated).Should(HaveField("Message", ContainSubstring("serial 2")))

		By("the backup of serial 1 is gone from the cluster; the store still holds that version")
		first := naming.StateBackupSecretName(suffix, 1)
		Eventually(func() bool { return secretExists(f.ns, first) }).Should(BeTrue())
		b := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: first}}
		update(b, func(b *corev1.Secret) { b.Finalizers = nil })
		Expect(k8s.Delete(ctx, b)).To(Succeed())
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).ShouldNot(ContainElement(HaveField("Serial", BeEquivalentTo(1))))
		stored, err := replicaReader().Get(ctx, replica.Version{Ref: replica.Ref{Namespace: f.ns, Kind: kind, Name: tc.Name}, Lineage: statetest.DefaultLineage, Serial: 1})
		Expect(err).NotTo(HaveOccurred())

		By("a restore of serial 1 brings it back from the store as a backup, and the Restore Job pushes it")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "1" })
		restore := waitForJob(tc, kind, 3)
		Expect(restore.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationRestore)))
		Expect(secretOf(f.ns, first).Data[state.StateKey]).To(Equal(stored))
		Expect(eventsOfType(f.ns, tc.Name, infrav1.ReplicaImportedReason, corev1.EventTypeNormal)).To(
			ContainElement(HaveField("Note", ContainSubstring("serial 1"))))
		completeJob(restore, clusterState(3, "10.13.0.1"), true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.RestoreStateAnnotation))

		By("a serial neither a backup nor in the store is refused, saying where it looked")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "42" })
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.RestoreJobSucceededCondition) }).Should(And(
			HaveField("Reason", infrav1.RestoreRefusedReason), HaveField("Message", ContainSubstring("the replica store holds no version of lineage "+statetest.DefaultLineage))))
	})

	It("holds a run on a state Secret older than the store's newest version, and a restore of that version lets it go on", func() {
		f := newFixture()
		tc := f.createCluster()
		completeJob(waitForJob(tc, kind, 1), clusterState(1, "10.14.0.1"), true, "")
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReplicatedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("serial 1"))))

		By("the store holds serial 4 of the same lineage (the Secret came back from an older backup, say): the next apply holds")
		newer := *clusterState(4, "10.14.0.4")
		newer.Lineage = statetest.DefaultLineage
		data := putInStore(replicaReader(), f.ns, kind, tc.Name, newer)
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		readable := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReadableCondition) }
		Eventually(readable).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaAheadReason),
			HaveField("Message", And(ContainSubstring("serial 4"), ContainSubstring("serial 1"), ContainSubstring(infrav1.RestoreStateAnnotation+"=4")))))
		Expect(warningEvents(f.ns, tc.Name, infrav1.ReplicaAheadReason)).To(Equal(1))
		Expect(kit.JobsOf(tc, kind)).To(HaveEach(HaveField("ObjectMeta.Name", HaveSuffix("-1"))), "no Job runs on the older Secret")

		By("a restore of serial 4 brings it back from the store and pushes it; then the apply runs")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "4" })
		restore := waitForJob(tc, kind, 2)
		Expect(restore.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationRestore)))
		Expect(secretOf(f.ns, naming.StateBackupSecretName(suffixOf(tc, kind), 4)).Data[state.StateKey]).To(Equal(data))
		completeJob(restore, &newer, true, "")
		apply := waitForJob(tc, kind, 3)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		completeJob(apply, clusterState(5, "10.14.0.4"), true, "")
		Eventually(readable).Should(HaveField("Status", metav1.ConditionTrue))
	})
})
