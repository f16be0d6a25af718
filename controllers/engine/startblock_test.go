package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// normals lists the Normal events of reason about name in ns.
func normals(ns, name, reason string) []eventsv1.Event {
	GinkgoHelper()
	return eventsOfType(ns, name, reason, corev1.EventTypeNormal)
}

var _ = Describe("A Job whose pod can never start", func() {
	It("reports JobCannotStart with the kubelet's words and a Warning event, and a deletion deletes the Job that never ran terraform instead of waiting out its deadline", func() {
		f := newFixture()
		tc := f.createCluster()
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		pod := pendingPod(job, "CreateContainerConfigError", `secret "cloud-creds" not found`)

		By("the apply's condition says JobCannotStart, naming the container and the missing Secret")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.JobCannotStartReason),
				HaveField("Message", And(ContainSubstring(job.Name), ContainSubstring("CreateContainerConfigError"), ContainSubstring(`secret "cloud-creds" not found`)))))
		}).Should(Succeed())
		Eventually(func() []eventsv1.Event { return warnings(f.ns, tc.Name, infrav1.JobCannotStartReason) }).ShouldNot(BeEmpty())

		By("a live object keeps its Job: it may still start once the Secret exists")
		Consistently(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &batchv1.Job{})
		}, "2s").Should(Succeed())

		By("the Job was created more than the run lease's grace ago (a pod that cannot start is noticed late)")
		// Within the grace a lease whose Job is not on the API server counts as a Job that may
		// still be created, so a deletion would wait out the rest of that minute first.
		aged := metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))
		for _, l := range leasesOf(f.ns) {
			if l.Labels[infrav1.LeaseLabel] == "" {
				continue
			}
			l.Spec.AcquireTime, l.Spec.RenewTime = &aged, &aged
			Expect(k8s.Update(ctx, &l)).To(Succeed())
		}

		By("the Cluster is deleted: the Job that never started goes at once, and the object with it")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &batchv1.Job{}))
		}).Should(BeTrue(), "the deletion deletes the Job that never started")
		// The recorder writes events asynchronously: the Job can be gone before its event is.
		Eventually(func() []eventsv1.Event { return normals(f.ns, tc.Name, "NeverStartedJobDeleted") }).ShouldNot(BeEmpty())
		// envtest runs no garbage collector: play it, as it deletes a deleted Job's pods.
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) }).Should(Satisfy(apierrors.IsNotFound), "the pod is gone")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tc), &infrav1.TerraformCluster{}))
		}).Should(BeTrue(), "no terraform ran and no state exists: the object goes without a destroy")
	})

	It("keeps a deleting object's Job whose main container ran, whatever its pod shows now", func() {
		f := newFixture()
		tc := f.createCluster()
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		pod := pendingPod(job, "CreateContainerConfigError", `secret "cloud-creds" not found`)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		aged := metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))
		for _, l := range leasesOf(f.ns) {
			if l.Labels[infrav1.LeaseLabel] != "" {
				l.Spec.AcquireTime, l.Spec.RenewTime = &aged, &aged
				Expect(k8s.Update(ctx, &l)).To(Succeed())
			}
		}

		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.DeletingCondition)).To(HaveField("Message", ContainSubstring(job.Name+" (Apply) runs")))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &batchv1.Job{})).To(Succeed())
			get(tc)
			g.Expect(tc.Status.ActiveJob).To(HaveField("Name", job.Name))
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).NotTo(HaveField("Reason", infrav1.JobCannotStartReason))
		}, "3s").Should(Succeed(), "a Job whose terraform may have run is waited for")
		Expect(normals(f.ns, tc.Name, "NeverStartedJobDeleted")).To(BeEmpty())
	})
})
