package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// provisionCluster creates the TerraformCluster and completes its first apply.
func (f *fixture) provisionCluster() *infrav1.TerraformCluster {
	GinkgoHelper()
	tc := f.createCluster()
	st := statetest.Cluster("10.1.0.1", 6443)
	completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
	Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
	return tc
}

var _ = Describe("TerraformMachine and TerraformMachinePool lifecycle", func() {
	It("waits for the cluster's infrastructure, then applies, fills the contract, and destroys", func() {
		f := newFixture()
		tm := f.createMachine("m1")

		By("waiting while no TerraformCluster is provisioned")
		waitForClusterInfrastructure(tm)
		Consistently(func() int { return len(kit.JobsOf(tm, infrav1.TerraformMachineKind)) }, "2s").Should(BeZero())

		By("applying once the cluster is provisioned")
		tc := f.provisionCluster()
		job := waitForJob(tm, infrav1.TerraformMachineKind, 1)
		st := statetest.Machine("tf://vm-1")
		completeJob(job, &st, true, "")
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(tm.Spec.ProviderID).To(Equal("tf://vm-1"))
			g.Expect(tm.Status.IsProvisioned()).To(BeTrue())
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())

		By("the cluster's deletion waits for its machine")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tc), infrav1.DeletionBlockedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("TerraformMachine/m1"))
		}).Should(Succeed())
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1),
			"no destroy while a machine remains")

		By("the machine is destroyed first, then the cluster")
		Expect(k8s.Delete(ctx, tm)).To(Succeed())
		mDestroy := waitForJob(tm, infrav1.TerraformMachineKind, 2)
		Expect(mDestroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		empty := statetest.Destroyed()
		completeJob(mDestroy, &empty, true, "")
		Eventually(kit.Gone(tm)).Should(BeTrue())
		cDestroy := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		completeJob(cDestroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
		Expect(secretExists(f.ns, naming.StateSecretName(suffixOf(tm, infrav1.TerraformMachineKind)))).To(BeFalse())
	})

	It("provisions a pool from provider_id_list and replicas", func() {
		f := newFixture()
		f.provisionCluster()
		tp := f.createPool("p1")
		job := waitForJob(tp, infrav1.TerraformMachinePoolKind, 1)
		st := statetest.MachinePool("tf://a", "tf://b", "tf://c")
		completeJob(job, &st, true, "")
		Eventually(func(g Gomega) {
			get(tp)
			g.Expect(tp.Spec.ProviderIDList).To(Equal([]string{"tf://a", "tf://b", "tf://c"}))
			g.Expect(tp.Status.Replicas).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(tp.Status.Ready).To(BeTrue())
			g.Expect(tp.Status.IsProvisioned()).To(BeTrue())
		}).Should(Succeed())
	})

	It("reports a pool's instances from the instances output", func() {
		f := newFixture()
		f.provisionCluster()
		tp := f.createPool("p1")
		st := statetest.MachinePool("tf://a", "tf://b", "tf://c")
		st.Outputs[state.OutputInstances] = statetest.Output{Value: []map[string]any{
			{"provider_id": "tf://a", "ready": true},
			{"provider_id": "tf://b", "ready": false, "message": "booting"},
			{"provider_id": "tf://c", "ready": true},
		}}
		completeJob(waitForJob(tp, infrav1.TerraformMachinePoolKind, 1), &st, true, "")
		want := []infrav1.TerraformMachinePoolInstance{
			{ProviderID: "tf://a", Ready: true}, {ProviderID: "tf://b", Message: "booting"}, {ProviderID: "tf://c", Ready: true},
		}
		Eventually(func(g Gomega) {
			get(tp)
			g.Expect(tp.Status.IsProvisioned()).To(BeTrue())
			g.Expect(tp.Status.Instances).To(Equal(want))
			g.Expect(tp.Status.ReadyInstances).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(envtest.Condition(tp, infrav1.OutputsValidCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())

		By("an instance the pool does not list makes the outputs invalid, and the status keeps the last valid instances")
		update(tp, func(tp *infrav1.TerraformMachinePool) {
			tp.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"instances":3}`)}
		})
		stray := statetest.MachinePool("tf://a", "tf://b")
		stray.Serial = 2
		stray.Outputs[state.OutputInstances] = statetest.Output{Value: []map[string]any{
			{"provider_id": "tf://a", "ready": true}, {"provider_id": "tf://b", "ready": true}, {"provider_id": "tf://z", "ready": true},
		}}
		completeJob(waitForJob(tp, infrav1.TerraformMachinePoolKind, 2), &stray, true, "")
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tp), infrav1.OutputsValidCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.OutputInvalidReason))
			g.Expect(c.Message).To(ContainSubstring(`the provider ID "tf://z" is not in provider_id_list`))
		}).Should(Succeed())
		Expect(tp.Status.Instances).To(Equal(want))
		Expect(tp.Spec.ProviderIDList).To(Equal([]string{"tf://a", "tf://b", "tf://c"}))

		By("an apply whose module has no instances output clears both fields")
		update(tp, func(tp *infrav1.TerraformMachinePool) {
			tp.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"instances":1}`)}
		})
		plain := statetest.MachinePool("tf://a")
		plain.Serial = 3
		completeJob(waitForJob(tp, infrav1.TerraformMachinePoolKind, 3), &plain, true, "")
		Eventually(func(g Gomega) {
			get(tp)
			g.Expect(envtest.Condition(tp, infrav1.OutputsValidCondition)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(tp.Spec.ProviderIDList).To(Equal([]string{"tf://a"}))
			g.Expect(tp.Status.Instances).To(BeNil())
			g.Expect(tp.Status.ReadyInstances).To(BeNil())
		}).Should(Succeed())
	})

	It("never overlaps a cluster apply and a machine apply (gate on)", func() {
		f := newFixture()
		tc := f.provisionCluster()
		tm := f.createMachine("m1")
		mJob := waitForJob(tm, infrav1.TerraformMachineKind, 1)

		By("a cluster apply waits for the machine apply in flight")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":5}`)}
		})
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tc), infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
			g.Expect(c.Message).To(ContainSubstring(mJob.Name))
		}).Should(Succeed())
		Expect(kit.JobsOf(tc, infrav1.TerraformClusterKind)).To(HaveLen(1))

		By("once the machine's Job ends, the cluster's starts, and a new machine apply waits")
		st := statetest.Machine("tf://vm-1")
		completeJob(mJob, &st, true, "")
		cJob := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		update(tm, func(tm *infrav1.TerraformMachine) {
			tm.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"flavor":"large"}`)}
		})
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tm), infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
		}).Should(Succeed())
		Expect(kit.JobsOf(tm, infrav1.TerraformMachineKind)).To(HaveLen(1))
		cst := statetest.Cluster("10.1.0.1", 6443)
		completeJob(cJob, &cst, true, "")
		waitForJob(tm, infrav1.TerraformMachineKind, 2)
	})
})
