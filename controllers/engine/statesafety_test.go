package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

func secretOf(ns, name string) *corev1.Secret {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func clusterState(serial uint64, host string) *statetest.State {
	st := statetest.Cluster(host, 6443)
	st.Serial = serial
	return &st
}

var _ = Describe("State safety", func() {
	It("holds an applied object whose state is lost, starts nothing, and recovers by a restore", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		stateName := naming.StateSecretName(suffix)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.5.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("the state Secret is protected and labelled, and backed up")
		Eventually(func(g Gomega) {
			s := secretOf(f.ns, stateName)
			g.Expect(s.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
			g.Expect(s.Labels).To(HaveKeyWithValue(infrav1.SecretRoleLabel, infrav1.SecretRoleState))
			g.Expect(s.OwnerReferences).To(BeEmpty(), "the garbage collector must never delete a state")
		}).Should(Succeed())
		backup := naming.StateBackupSecretName(suffix, 1)
		Expect(secretOf(f.ns, backup).Annotations).To(HaveKeyWithValue(infrav1.BackupSerialAnnotation, "1"))
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(
			ConsistOf(HaveField("Serial", BeEquivalentTo(1))))

		By("deleting the state Secret waits for the protection finalizer")
		Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: stateName}})).To(Succeed())
		Consistently(func() bool { return secretExists(f.ns, stateName) }, "2s").Should(BeTrue())

		By("with the finalizer forced off, the object reports StateLost")
		Eventually(func() error {
			s := secretOf(f.ns, stateName)
			s.Finalizers = nil
			return k8s.Update(ctx, s)
		}).Should(Succeed())
		Eventually(func() bool { return secretExists(f.ns, stateName) }).Should(BeFalse())
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.StateReadableCondition) }).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.StateLostReason)))
		Expect(envtest.Condition(get(tc), infrav1.ReadyCondition)).To(HaveField("Reason", infrav1.StateLostReason))

		By("an input change starts no Job against the lost state")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "3s").Should(Equal(1))

		By("deleting the object keeps its finalizer: nothing is destroyed, nothing let go")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Consistently(kit.Gone(tc), "3s").Should(BeFalse())
		Expect(get(tc).Finalizers).To(ContainElement(infrav1.Finalizer))
		Expect(envtest.Condition(tc, infrav1.DeletingCondition)).To(HaveField("Reason", infrav1.StateLostReason))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1))

		By("restoring serial 1 runs a Restore Job; then the deletion destroys and lets go")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "1" })
		restore := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(restore.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationRestore)))
		// The per-run Secret is written after the Job (docs/jobs.md): wait for it.
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunSecretName(restore.Name)}, s)).To(Succeed())
			g.Expect(s.Data).To(HaveKey("restore.tfstate"))
		}).Should(Succeed())
		completeJob(restore, clusterState(2, "10.5.0.1"), true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.RestoreStateAnnotation))
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		empty := statetest.Destroyed()
		empty.Serial = 3
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(secretExists(f.ns, stateName)).To(BeFalse(), "the state goes after a destroy that emptied it")
	})

	It("refuses a restore of a serial that is no backup, with a reason, and starts nothing", func() {
		f := newFixture()
		tc := f.createCluster()
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.6.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.RestoreStateAnnotation] = "42" })
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.RestoreJobSucceededCondition) }).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.RestoreRefusedReason)))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))
	})

	It("lets a Retain deletion go without a destroy, keeping state, inputs and backups", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.7.0.1"), true, "")
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(HaveLen(1))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.DeletionPolicy = infrav1.DeletionPolicyRetain })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1), "no destroy Job")
		for _, name := range []string{naming.StateSecretName(suffix), naming.InputsSecretName(suffix), naming.StateBackupSecretName(suffix, 1)} {
			s := secretOf(f.ns, name)
			Expect(s.Finalizers).NotTo(ContainElement(infrav1.StateProtectionFinalizer), name)
			Expect(s.OwnerReferences).To(BeEmpty(), name+" must survive its owner")
			Expect(s.Annotations).To(HaveKeyWithValue(infrav1.RetainedAnnotation, "true"), name)
		}
	})

	It("lets go after a destroy with the state deleted and the backups kept, unprotected, for the garbage collector", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.9.0.1"), true, "")
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(HaveLen(1))
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroyed := statetest.Destroyed()
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), &destroyed, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(secretExists(f.ns, naming.StateSecretName(suffix))).To(BeFalse(), "the emptied state goes")
		Expect(secretExists(f.ns, naming.InputsSecretName(suffix))).To(BeFalse(), "the durable inputs go")
		// A mistaken destroy can still be undone from the backup taken before it, until the
		// garbage collector follows the owner reference (none runs in envtest).
		b := secretOf(f.ns, naming.StateBackupSecretName(suffix, 1))
		Expect(b.Finalizers).NotTo(ContainElement(infrav1.StateProtectionFinalizer))
		Expect(metav1.GetControllerOf(b)).NotTo(BeNil(), "the garbage collector deletes it with its owner")
		Expect(metav1.GetControllerOf(b).UID).To(Equal(tc.UID))
	})

	It("never takes an earlier object's Jobs: a re-created object runs, reports and destroys its own", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.8.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroyed := statetest.Destroyed()
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), &destroyed, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
		// No garbage collector runs here: the earlier object's Jobs stay, as a finalizer on them
		// would keep them in a real cluster.
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(2))

		By("re-created under the same name with the same inputs, it applies with a Job of its own")
		again := f.createCluster()
		own := waitForJob(again, infrav1.TerraformClusterKind, 3)
		Expect(metav1.GetControllerOf(own).UID).To(Equal(again.UID))
		// A new state gets a new lineage, as Terraform gives one (the suite's store holds the
		// earlier object's versions of the default lineage).
		second := *clusterState(1, "10.8.0.2")
		second.Lineage = "5e0c7a11-0000-4000-8000-0000000000a2"
		completeJob(own, &second, true, "")
		Eventually(func(g Gomega) {
			get(again)
			g.Expect(again.Status.IsProvisioned()).To(BeTrue())
			g.Expect(again.Spec.ControlPlaneEndpoint.Host).To(Equal("10.8.0.2"), "its own outputs")
			g.Expect(again.Annotations).NotTo(HaveKey(infrav1.DestroyedAnnotation), "the earlier destroy is not its own")
			g.Expect(again.Status.LastRun).To(HaveField("Job", own.Name))
		}).Should(Succeed())

		By("deleted, it destroys what it applied and lets go with the state empty")
		Expect(k8s.Delete(ctx, again)).To(Succeed())
		destroy := waitForJob(again, infrav1.TerraformClusterKind, 4)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		empty := statetest.Destroyed()
		empty.Serial, empty.Lineage = 2, second.Lineage
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(again)).Should(BeTrue())
		Expect(secretExists(f.ns, naming.StateSecretName(suffix))).To(BeFalse())
	})

	It("starts nothing while a Job of an earlier object of the same name still runs, and says why", func() {
		f := newFixture()
		tc := f.createCluster()
		old := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		pod, err := envtest.StartJob(ctx, k8s, old)
		Expect(err).NotTo(HaveOccurred())
		// The earlier object goes while its apply runs: deleted, then its finalizer forced off
		// (in this order: the controller puts the finalizer back on a live object).
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Finalizers = nil })
		Eventually(kit.Gone(tc)).Should(BeTrue())

		again := f.createCluster()
		Eventually(func() string {
			c := envtest.Condition(get(again), infrav1.ApplyJobSucceededCondition)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring("of an earlier object of this name still runs"))
		Consistently(func() int { return len(kit.JobsOf(again, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))
		Expect(get(again).Annotations).To(HaveKey(infrav1.BlockMoveAnnotation), "the state is in use: block-move stays")

		By("once it ends, the new object applies with a Job of its own")
		Expect(envtest.FinishJob(ctx, k8s, get(old), pod, true, "")).To(Succeed())
		own := waitForJob(again, infrav1.TerraformClusterKind, 2)
		Expect(metav1.GetControllerOf(own).UID).To(Equal(again.UID))
		Expect(get(again).Status.LastRun).To(BeNil(), "the earlier object's Job is never counted")
	})
})

var _ = batchv1.JobComplete

var _ = Describe("State protection", func() {
	It("puts the protection finalizer back on a state Secret that lost it, after the next Job", func() {
		f := newFixture()
		tc := f.createCluster()
		stateName := naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind))
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.8.0.1"), true, "")
		// The Job is bookkept (its backup is in status) before anyone touches the Secret.
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(
			ConsistOf(HaveField("Serial", BeEquivalentTo(1))))
		Expect(secretOf(f.ns, stateName).Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))

		By("someone removes the finalizer by hand; the Secret stays")
		Eventually(func() error {
			s := secretOf(f.ns, stateName)
			s.Finalizers = nil
			return k8s.Update(ctx, s)
		}).Should(Succeed())
		Expect(secretOf(f.ns, stateName).Finalizers).To(BeEmpty())

		By("the next apply's bookkeeping protects the state again")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		Consistently(func() []string { return secretOf(f.ns, stateName).Finalizers }, "1s").Should(BeEmpty())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), clusterState(2, "10.8.0.1"), true, "")
		Eventually(func() []string { return secretOf(f.ns, stateName).Finalizers }).Should(ContainElement(infrav1.StateProtectionFinalizer))

		By("so deleting the state Secret waits again")
		Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: stateName}})).To(Succeed())
		Consistently(func() bool { return secretExists(f.ns, stateName) }, "2s").Should(BeTrue())
	})

	It("goes on using a state Secret marked for deletion and says so with a warning", func() {
		f := newFixture()
		tc := f.createCluster()
		stateName := naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind))
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.9.0.1"), true, "")
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(
			ConsistOf(HaveField("Serial", BeEquivalentTo(1))))
		Expect(warningEvents(f.ns, tc.Name, infrav1.StateSecretMarkedForDeletionReason)).To(BeZero())

		By("someone deletes the state Secret: the finalizer keeps it, marked for deletion")
		Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: stateName}})).To(Succeed())
		Expect(secretOf(f.ns, stateName).DeletionTimestamp).NotTo(BeNil())

		By("an input change applies on it, not held as lost, and the pass that read it warns")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":4}`)}
		})
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), clusterState(2, "10.9.0.1"), true, "")
		Eventually(func() []eventsv1.Event {
			return eventsOfType(f.ns, tc.Name, infrav1.StateSecretMarkedForDeletionReason, corev1.EventTypeWarning)
		}).Should(ContainElement(HaveField("Note", And(ContainSubstring(f.ns+"/"+stateName), ContainSubstring(infrav1.StateProtectionFinalizer)))))
		Eventually(func() []infrav1.StateBackup { return get(tc).Status.StateBackups }).Should(ContainElement(HaveField("Serial", BeEquivalentTo(2))))
		Expect(envtest.Condition(get(tc), infrav1.StateReadableCondition)).To(HaveField("Status", metav1.ConditionTrue))
		s := secretOf(f.ns, stateName)
		Expect(s.DeletionTimestamp).NotTo(BeNil())
		Expect(s.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
	})
})
