package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func pauseCluster(f *fixture, paused bool) {
	GinkgoHelper()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.cluster}}
	update(c, func(c *clusterv1.Cluster) { c.Spec.Paused = &paused })
}

var _ = Describe("Pause and move", func() {
	It("starts nothing while paused, and clears block-move only once the running Job ends", func() {
		f := newFixture()
		tc := f.createCluster()
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)

		By("pausing while the Job runs: block-move stays")
		pauseCluster(f, true)
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.PausedCondition) }).Should(
			HaveField("Status", metav1.ConditionTrue))
		Consistently(func() map[string]string { return get(tc).Annotations }, "2s").Should(
			HaveKey(infrav1.BlockMoveAnnotation), "block-move must stay while the Job runs")

		By("the Job ends: block-move is cleared, and no new Job starts")
		st := statetest.Cluster("10.2.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Variables = nil })
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1),
			"a paused object starts no Job, even with changed inputs")

		By("a paused deletion destroys nothing and keeps the state")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))
		Expect(kit.Gone(tc)()).To(BeFalse(), "the finalizer holds a paused deletion")
		Expect(secretExists(f.ns, naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind)))).To(BeTrue())

		By("unpausing resumes the deletion through a destroy Job")
		pauseCluster(f, false)
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
	})

	It("lets a paused delete-for-move deletion go without destroying or deleting state", func() {
		f := newFixture()
		tc := f.createCluster()
		st := statetest.Cluster("10.3.0.1", 6443)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		// clusterctl move: pause, wait for block-move, annotate, delete.
		pauseCluster(f, true)
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.DeleteForMoveAnnotation] = "" })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1), "no destroy Job")
		Expect(secretExists(f.ns, naming.StateSecretName(suffixOf(tc, infrav1.TerraformClusterKind)))).To(BeTrue(),
			"the state stays: it moved with the object")
	})

	It("backs up the state of a Job that ended while paused once unpaused, and owns the state's lock Lease", func() {
		f := newFixture()
		tc := f.terraformCluster().Obj()
		suffix := naming.StateSuffix(f.ns, infrav1.TerraformClusterKind, tc.Name)
		lockName := naming.StateLockLeaseName(suffix)
		// A lock Lease from before the keeper owned it: the next Job's start owns it.
		Expect(k8s.Create(ctx, objects.Lease(f.ns, lockName).Obj())).To(Succeed())
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		st := statetest.Cluster("10.5.0.1", 6443)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
		Eventually(func() bool { return secretExists(f.ns, naming.StateBackupSecretName(suffix, 1)) }).Should(BeTrue())
		lock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: lockName}}
		Expect(get(lock).OwnerReferences).To(ContainElement(And(HaveField("UID", get(tc).UID), HaveField("Kind", infrav1.TerraformClusterKind))),
			"the lock Lease is owned by its object, so the garbage collector deletes it with the object (a move never carries Leases)")

		By("an apply that ends while paused leaves its backup due")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Variables = nil })
		job := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		pauseCluster(f, true)
		st.Serial = 2
		completeJob(job, &st, true, "")
		Eventually(func() map[string]string { return get(tc).Annotations }).Should(And(
			HaveKeyWithValue(infrav1.BackupDueAnnotation, job.Name), Not(HaveKey(infrav1.BlockMoveAnnotation))))
		Consistently(func() bool { return secretExists(f.ns, naming.StateBackupSecretName(suffix, 2)) }, "2s").Should(BeFalse(),
			"no backup while paused: a move would leave it behind")

		By("unpaused, the state is backed up without a Job, and the record goes")
		pauseCluster(f, false)
		Eventually(func() bool { return secretExists(f.ns, naming.StateBackupSecretName(suffix, 2)) }).Should(BeTrue())
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.BackupDueAnnotation))
		b := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: naming.StateBackupSecretName(suffix, 2)}}
		Expect(get(b).Annotations).To(And(HaveKeyWithValue(infrav1.BackupSerialAnnotation, "2"), HaveKeyWithValue(infrav1.BackupJobAnnotation, job.Name)))
		Expect(b.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).NotTo(ContainElement(HaveField("Name", naming.JobName(suffix, 3))),
			"the backup needs no Job")
	})

	It("never counts a Job again on the source copy of a move, whose annotations clusterctl replaced", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		st := statetest.Cluster("10.6.0.1", 6443)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
		backup := naming.StateBackupSecretName(suffix, 1)
		Eventually(func() bool { return secretExists(f.ns, backup) }).Should(BeTrue())
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		// clusterctl move: pause, wait for block-move, copy, then per object: replace all
		// annotations with delete-for-move, delete, strip the finalizers. The backup goes the
		// same way.
		pauseCluster(f, true)
		Eventually(func() map[string]string { return get(tc).Annotations }).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Annotations = map[string]string{infrav1.DeleteForMoveAnnotation: ""}
		})
		b := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: backup}}
		update(b, func(b *corev1.Secret) { b.Finalizers = nil })
		Expect(k8s.Delete(ctx, b)).To(Succeed())
		Consistently(func() bool { return secretExists(f.ns, backup) }, "3s").Should(BeFalse(),
			"the source re-created the backup clusterctl deleted: it counted the Job again")
		Expect(get(tc).Annotations).NotTo(HaveKey(infrav1.RunSeqAnnotation), "the run sequence was written again")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(secretExists(f.ns, backup)).To(BeFalse())
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1), "no destroy Job")
	})

	It("recovers a wiped status without a new apply", func() {
		f := newFixture()
		tc := f.createCluster()
		st := statetest.Cluster("10.4.0.1", 6443)
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		Eventually(func() error {
			get(tc)
			tc.Status = infrav1.TerraformClusterStatus{}
			return k8s.Status().Update(ctx, tc)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Status.IsProvisioned()).To(BeTrue())
			g.Expect(envtest.Condition(tc, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))
	})

	It("adopts the Job an earlier attempt created before crashing, never creating a second", func() {
		f := newFixture()
		// The crashed manager got as far as the lease and the Job (its UID is unknown yet, so
		// create the object first, paused, and build the Job it would have built).
		tc := f.terraformCluster().Paused().Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		name := naming.JobName(suffixOf(tc, infrav1.TerraformClusterKind), 1)
		taken := metav1.NewMicroTime(clk.Now())
		Expect(k8s.Create(ctx, objects.Lease(f.ns, naming.RunLeaseName(suffixOf(tc, infrav1.TerraformClusterKind))).
			Label(infrav1.LeaseLabel, infrav1.LeaseKindRun).Holder(name).RenewTime(taken).
			With(func(l *coordinationv1.Lease) { l.Spec.AcquireTime = &taken }).Obj())).To(Succeed())
		job, err := jobs.Build(crashParams(tc, name))
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, job)).To(Succeed())

		// The restarted manager finds the object unpaused and the same run sequence.
		update(tc, func(tc *infrav1.TerraformCluster) { delete(tc.Annotations, infrav1.PausedAnnotation) })
		Eventually(func() *infrav1.ActiveJob { return get(tc).Status.ActiveJob }).Should(HaveField("Name", name))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))
		Expect(get(tc).Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
	})
})

var _ = client.IgnoreNotFound
