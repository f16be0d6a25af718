package engine_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// completeDrift plays a drift check that found drift, or not.
func completeDrift(job *batchv1.Job, drift bool) {
	GinkgoHelper()
	pod, err := envtest.StartJob(ctx, k8s, job)
	Expect(err).NotTo(HaveOccurred())
	Expect(envtest.FinishJob(ctx, k8s, job, pod, true, envtest.DriftResult(drift))).To(Succeed())
}

// jobsByOperation counts the object's Jobs on the API server by operation.
func jobsByOperation(o *infrav1.TerraformCluster) map[infrav1.Operation]int {
	out := map[infrav1.Operation]int{}
	for _, j := range kit.JobsOf(o, infrav1.TerraformClusterKind) {
		out[infrav1.Operation(j.Labels[infrav1.OperationLabel])]++
	}
	return out
}

// nextDrift moves the clock past the next check and returns the drift Job of run seq.
//
// Before its first check, an object's schedule counts from its creationTimestamp, which the
// API server stamps by the real clock, while the manager reads the suite's fake clock, which
// only the specs move. The specs that ran before this one may have left real time ahead of
// the fake clock by more than an interval, so two minutes past now alone is not always past
// the first check: the clock goes at least two minutes past the object's creation too. From
// the first check on, the schedule counts from the last check, stamped by the fake clock.
func nextDrift(tc *infrav1.TerraformCluster, seq int64) *batchv1.Job {
	GinkgoHelper()
	next := clk.Now().Add(2 * time.Minute)
	if created := get(tc).CreationTimestamp.Add(2 * time.Minute); created.After(next) {
		next = created
	}
	clk.SetTime(next)
	kit.Poke(tc)
	job := waitForJob(tc, infrav1.TerraformClusterKind, seq)
	Expect(job.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDrift)))
	return job
}

var _ = Describe("Drift checks", func() {
	It("check on a schedule under the run lease only, report drift, and remediate with one apply", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: time.Minute}, Mode: infrav1.DriftModeReport}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.9.0.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("a due check runs a Drift Job under the run lease alone: no cluster lease, the gate is not involved")
		drift := nextDrift(tc, 2)
		for _, l := range leasesOf(f.ns) {
			Expect(l.Labels[infrav1.LeaseLabel]).To(Equal(infrav1.LeaseKindRun), "lease %s", l.Name)
		}
		Expect(leasesOf(f.ns)).To(HaveLen(1))

		By("it finds drift: DriftDetected=True, the last check recorded, and in Report mode no apply follows")
		completeDrift(drift, true)
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftDetectedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.DriftFoundReason),
				HaveField("Message", ContainSubstring("0 to create, 1 to update, 0 to replace, 0 to delete"))))
		Expect(tc.Annotations).To(HaveKey(infrav1.LastDriftCheckAnnotation))
		Expect(tc.Status.LastDriftCheck).NotTo(BeNil())
		Expect(envtest.Condition(tc, infrav1.DriftJobSucceededCondition)).To(HaveField("Status", metav1.ConditionTrue))
		Consistently(func() int { return jobsByOperation(tc)[infrav1.OperationApply] }, "2s").Should(Equal(1))

		By("in Remediate mode, the next check finds drift and exactly one apply follows; DriftDetected turns False")
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Drift.Mode = infrav1.DriftModeRemediate })
		completeDrift(nextDrift(tc, 3), true)
		apply := waitForJob(tc, infrav1.TerraformClusterKind, 4)
		Expect(apply.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		completeJob(apply, clusterState(2, "10.9.0.1"), true, "")
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.DriftDetectedCondition) }).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.RemediatedReason)))
		Expect(get(tc).Annotations).NotTo(HaveKey(infrav1.RemediateAnnotation))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeNumerically("<=", 4),
			"one apply per drift found, then nothing until the next check")
	})

	It("keep at most one succeeded and one failed Job per operation after fifty checks", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: time.Minute}, Mode: infrav1.DriftModeReport}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), clusterState(1, "10.9.1.1"), true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		for i := int64(0); i < 50; i++ {
			job := nextDrift(tc, 2+i)
			if i%10 == 9 {
				// Every tenth check fails: failed Jobs have a history of their own.
				pod, err := envtest.StartJob(ctx, k8s, job)
				Expect(err).NotTo(HaveOccurred())
				Expect(envtest.FinishJob(ctx, k8s, job, pod, false, "")).To(Succeed())
			} else {
				completeDrift(job, false)
			}
			Eventually(func() string { return get(tc).Annotations[infrav1.RunSeqAnnotation] }).Should(Equal(fmt.Sprint(3 + i)))
		}
		Eventually(func(g Gomega) {
			counts := jobsByOperation(tc)
			g.Expect(counts[infrav1.OperationDrift]).To(BeNumerically("<=", 2), "%v", counts)
			g.Expect(counts[infrav1.OperationApply]).To(Equal(1), "%v", counts)
		}).Should(Succeed())
		Expect(naming.JobName(suffixOf(tc, infrav1.TerraformClusterKind), 51)).To(BeElementOf(jobNames(tc)), "the newest check is kept")
	})
})

func jobNames(tc *infrav1.TerraformCluster) []string {
	var out []string
	for _, j := range kit.JobsOf(tc, infrav1.TerraformClusterKind) {
		out = append(out, j.Name)
	}
	return out
}
