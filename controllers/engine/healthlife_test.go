package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// completeHealthDrift plays a drift check that found no drift and read the health output h
// (nil: the module has none).
func completeHealthDrift(job *batchv1.Job, h *runnerapi.HealthSample) {
	GinkgoHelper()
	pod, err := envtest.StartJob(ctx, k8s, job)
	Expect(err).NotTo(HaveOccurred())
	found := false
	r := runnerapi.Result{Operation: runnerapi.OperationDrift, Outcome: runnerapi.OutcomeSucceeded, Binary: "tofu",
		Steps: []runnerapi.Step{{Name: "init"}, {Name: "plan"}, {Name: "show-json"}}, Drift: &found, Health: h}
	Expect(envtest.FinishJob(ctx, k8s, job, pod, true, string(runnerapi.Encode(r)))).To(Succeed())
}

// askForCheck writes captf.io/drift-check=v and returns the Drift Job of run seq it starts.
func askForCheck(tm *infrav1.TerraformMachine, v string, seq int64) *batchv1.Job {
	GinkgoHelper()
	update(tm, func(tm *infrav1.TerraformMachine) { tm.Annotations[infrav1.DriftCheckAnnotation] = v })
	job := waitForJob(tm, infrav1.TerraformMachineKind, seq)
	Expect(operationOf(job)).To(Equal(infrav1.OperationDrift))
	return job
}

var _ = Describe("Health samples", func() {
	It("count the health output from an apply and from drift checks, turn Ready False at the threshold without touching provisioned, and start again on a healthy sample", func() {
		f := newFixture()
		f.provisionCluster()
		tm := f.createMachine("hm")
		update(tm, func(tm *infrav1.TerraformMachine) {
			tm.Spec.Health = &infrav1.MachineHealthSpec{UnhealthyThreshold: 2}
			// A year: no check is due by the schedule; the checks below are asked for.
			tm.Spec.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: 365 * 24 * time.Hour}, Mode: infrav1.DriftModeReport}
		})

		By("the apply's state says healthy: InfrastructureHealthy=True, one sample, Ready")
		st := statetest.Machine("tf://hm")
		st.Outputs["health"] = statetest.Output{Value: map[string]any{"healthy": true, "message": "all good"}}
		completeJob(waitForJob(tm, infrav1.TerraformMachineKind, 1), &st, true, "")
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.InfrastructureHealthyCondition)).To(And(HaveField("Status", metav1.ConditionTrue),
				HaveField("Reason", infrav1.HealthyReason), HaveField("Message", ContainSubstring("all good"))))
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(tm.Status.Health).NotTo(BeNil())
			g.Expect(tm.Status.Health.LastSampleTime).NotTo(BeNil())
			g.Expect(tm.Status.Health.ConsecutiveUnhealthy).To(BeZero())
		}).Should(Succeed())

		By("a drift check reads unhealthy: False with the module's message, 1 of 2, still Ready")
		completeHealthDrift(askForCheck(tm, "c1", 2), &runnerapi.HealthSample{Message: "disk full"})
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.InfrastructureHealthyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", infrav1.UnhealthyReason), HaveField("Message", ContainSubstring("disk full (1 of 2"))))
			g.Expect(tm.Status.Health.ConsecutiveUnhealthy).To(BeEquivalentTo(1))
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func() int { return warningEvents(f.ns, tm.Name, infrav1.UnhealthyReason) }).Should(Equal(1))

		By("a value that does not fit the contract is not counted: Unknown, still 1")
		completeHealthDrift(askForCheck(tm, "c2", 3), &runnerapi.HealthSample{Invalid: `output "health": healthy must be a bool`})
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.InfrastructureHealthyCondition)).To(And(HaveField("Status", metav1.ConditionUnknown),
				HaveField("Reason", infrav1.HealthOutputInvalidReason)))
			g.Expect(tm.Status.Health.ConsecutiveUnhealthy).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("the second unhealthy sample reaches the threshold: Ready=False InfrastructureUnhealthy, provisioned stays true, a Warning event")
		completeHealthDrift(askForCheck(tm, "c3", 4), &runnerapi.HealthSample{Message: "disk still full"})
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", infrav1.InfrastructureUnhealthyReason), HaveField("Message", ContainSubstring("disk still full (2 of 2"))))
			g.Expect(tm.Status.IsProvisioned()).To(BeTrue())
			g.Expect(tm.Status.Health.ConsecutiveUnhealthy).To(BeEquivalentTo(2))
		}).Should(Succeed())
		Eventually(func() int { return warningEvents(f.ns, tm.Name, infrav1.InfrastructureUnhealthyReason) }).Should(Equal(1))
		Consistently(func() int64 { return runSeqOf(get(tm)) }, "2s").Should(BeEquivalentTo(5), "an unhealthy machine starts no Job of its own: Cluster API replaces it")

		By("a healthy sample starts the count again: Ready=True")
		completeHealthDrift(askForCheck(tm, "c4", 5), &runnerapi.HealthSample{Healthy: true})
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(envtest.Condition(tm, infrav1.InfrastructureHealthyCondition)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(tm.Status.Health.ConsecutiveUnhealthy).To(BeZero())
		}).Should(Succeed())

		By("a module without a health output: Unknown NoHealthOutput, never unhealthy")
		completeHealthDrift(askForCheck(tm, "c5", 6), nil)
		Eventually(func(g Gomega) {
			get(tm)
			g.Expect(envtest.Condition(tm, infrav1.InfrastructureHealthyCondition)).To(And(HaveField("Status", metav1.ConditionUnknown),
				HaveField("Reason", infrav1.NoHealthOutputReason)))
			g.Expect(envtest.Condition(tm, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())
	})
})
