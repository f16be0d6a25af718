package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("TerraformCluster lifecycle", func() {
	It("applies, re-applies on changed inputs, backs off after a failure, and destroys on delete", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)

		By("starting apply Job 1 under the run lease, with block-move and durable inputs first")
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(job.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(job.Annotations).To(HaveKey(infrav1.InputsHashAnnotation))
		Expect(jobs.StateLineageOf(job)).To(BeEmpty(), "a first apply read no state: its channel checks no lineage")
		get(tc)
		Expect(tc.Finalizers).To(ContainElement(infrav1.Finalizer))
		Expect(tc.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
		Expect(secretExists(f.ns, naming.InputsSecretName(suffix))).To(BeTrue())
		By("the object's own runner account, its Role and RoleBinding, and the empty state Secret and lock Lease exist before its first Job")
		account := naming.RunnerServiceAccountName(suffix)
		Expect(job.Spec.Template.Spec.ServiceAccountName).To(Equal(account))
		sa := &corev1.ServiceAccount{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: account}, sa)).To(Succeed())
		Expect(metav1.GetControllerOf(sa).UID).To(Equal(tc.UID), "the account goes with the object")
		role := &rbacv1.Role{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: account}, role)).To(Succeed())
		Expect(role.Rules).To(ContainElement(HaveField("ResourceNames", ConsistOf(naming.StateSecretName(suffix)))))
		binding := &rbacv1.RoleBinding{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: account}, binding)).To(Succeed())
		Expect(binding.Subjects).To(ConsistOf(HaveField("Name", account)))
		pre := &corev1.Secret{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.StateSecretName(suffix)}, pre)).To(Succeed())
		Expect(pre.Data).To(BeEmpty(), "created empty: no state yet")
		Expect(pre.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.StateLockLeaseName(suffix)}, &coordinationv1.Lease{})).To(Succeed())
		Eventually(func() bool { return secretExists(f.ns, naming.RunSecretName(job.Name)) }).Should(BeTrue())
		Eventually(func() *infrav1.ActiveJob { return get(tc).Status.ActiveJob }).Should(
			HaveField("Name", job.Name))

		By("completing the Job: outputs fill the contract and Ready")
		st := statetest.Cluster("10.0.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(tc.Status.IsProvisioned()).To(BeTrue())
			g.Expect(tc.Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.0.1"))
			g.Expect(tc.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
			g.Expect(envtest.Condition(tc, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(tc.Status.ActiveJob).To(BeNil())
			g.Expect(tc.Status.LastRun).To(HaveField("Outcome", infrav1.RunSucceeded))
		}).Should(Succeed())
		Expect(runSeqOf(tc)).To(BeEquivalentTo(2))
		Eventually(func() bool { return secretExists(f.ns, naming.RunSecretName(job.Name)) }).Should(BeFalse(),
			"the per-run Secret is deleted once the Job is counted")
		Eventually(func() int { return len(leasesOf(f.ns)) }).Should(BeZero(), "leases are released once the Job is counted")
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1),
			"unchanged inputs start no second apply")

		By("changing the inputs: exactly one new apply")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":3}`)}
		})
		job2 := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(job2.Annotations[infrav1.InputsHashAnnotation]).NotTo(Equal(job.Annotations[infrav1.InputsHashAnnotation]))
		Expect(jobs.StateLineageOf(job2)).To(Equal(statetest.DefaultLineage),
			"the channel serves only the state this pass read, so a state lost since is refused at the point of use (I7)")
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(2))

		By("failing it: the runner's reason lands in the condition, and the retry waits for the backoff")
		completeJob(job2, nil, false, "Error: creating network: quota exceeded")
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tc), infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.JobFailedReason))
			g.Expect(c.Message).To(ContainSubstring("quota exceeded"))
		}).Should(Succeed())
		Expect(tc.Annotations).To(HaveKeyWithValue(infrav1.FailuresAnnotation, "1"))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(2),
			"no retry inside the 1 minute backoff")
		clk.Step(61 * time.Second)
		kit.Poke(tc)
		job3 := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		completeJob(job3, &st, true, "")
		Eventually(func() string { return get(tc).Annotations[infrav1.AppliedHashAnnotation] }).Should(
			Equal(job3.Annotations[infrav1.InputsHashAnnotation]))
		Expect(tc.Annotations).NotTo(HaveKey(infrav1.FailuresAnnotation))

		By("deleting: a destroy Job, then state, inputs and leases go, then the object")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		Expect(jobs.StateLineageOf(destroy)).To(Equal(statetest.DefaultLineage))
		Expect(secretExists(f.ns, naming.StateSecretName(suffix))).To(BeTrue(), "state stays while destroy runs")
		// The lock Lease (created before the first Job) stays unheld between runs.
		lock := objects.Lease(f.ns, naming.StateLockLeaseName(suffix)).Obj()
		empty := statetest.Destroyed()
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(lock), &coordinationv1.Lease{}))).To(BeTrue(),
			"the unheld state lock goes with the state")
		Expect(secretExists(f.ns, naming.StateSecretName(suffix))).To(BeFalse())
		Expect(secretExists(f.ns, naming.InputsSecretName(suffix))).To(BeFalse())
		Expect(leasesOf(f.ns)).To(BeEmpty())
	})
})
