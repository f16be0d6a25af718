package engine_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// registryAnswer is what a registry with basic auth says to a wrong password.
const registryAnswer = `GET http://127.0.0.1:5000/v2/modules/net/manifests/v1: UNAUTHORIZED: authentication failed: wrong username or password for user "captf"`

// pendingPod plays the Job controller and a kubelet that cannot pull the main container's
// image: the Job active with no ready pod, its pod Pending with the main container Waiting.
func pendingPod(job *batchv1.Job, reason, message string) *corev1.Pod {
	GinkgoHelper()
	now := metav1.Now()
	job.Status.StartTime, job.Status.Active, job.Status.Ready = &now, 1, ptrTo[int32](0)
	Expect(k8s.Status().Update(ctx, job)).To(Succeed())
	pod := objects.PodOf(job, job.Name+"-pod").Obj()
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	setWaiting(pod, reason, message)
	return pod
}

func setWaiting(pod *corev1.Pod, reason, message string) {
	GinkgoHelper()
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, pod)).To(Succeed())
	c := pod.Spec.Containers[0]
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
}

var _ = Describe("A Job whose pod cannot pull its image", func() {
	It("reports ImagePullFailed with the registry's answer and a Warning event, keeps the Job, its run lease and activeJob, and reports the run again once the pod runs", func() {
		f := newFixture()
		tc := f.createCluster()
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		image := job.Spec.Template.Spec.Containers[0].Image
		pod := pendingPod(job, "ErrImagePull", fmt.Sprintf("failed to pull image %q: %s", image, registryAnswer))

		By("the condition of the apply says ImagePullFailed, with the registry's answer")
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ImagePullFailedReason),
				HaveField("Message", And(ContainSubstring(job.Name), ContainSubstring("wrong username or password"), ContainSubstring("ErrImagePull")))))
		}).Should(Succeed())
		Eventually(func() []string {
			var notes []string
			for _, e := range warnings(f.ns, tc.Name, infrav1.ImagePullFailedReason) {
				notes = append(notes, e.Note)
			}
			return notes
		}).Should(ContainElement(ContainSubstring("wrong username or password")))

		By("the back-off keeps the registry's answer")
		setWaiting(pod, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: failed to pull image %q: %s", image, image, registryAnswer))
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Annotations["test.captf.io/poke"] = "1" })
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(And(
				HaveField("Reason", infrav1.ImagePullFailedReason),
				HaveField("Message", And(ContainSubstring("(ImagePullBackOff): failed to pull image"), Not(ContainSubstring("Back-off"))))))
		}).Should(Succeed())

		By("nothing is failed, deleted or released: the Job, activeJob and the run lease stay")
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &batchv1.Job{})).To(Succeed())
			get(tc)
			g.Expect(tc.Status.ActiveJob).To(HaveField("Name", job.Name))
			lease := &coordinationv1.Lease{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunLeaseName(suffixOf(tc, infrav1.TerraformClusterKind))}, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(job.Name)))
		}, "2s").Should(Succeed())

		By("the secret is fixed: the pod runs, the Job counts it ready, and the condition says the Job runs")
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, pod)).To(Succeed())
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		pod.Status.ContainerStatuses[0].Ready = true
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, job)).To(Succeed())
		job.Status.Ready = ptrTo[int32](1)
		Expect(k8s.Status().Update(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(And(
				HaveField("Status", metav1.ConditionUnknown), HaveField("Reason", infrav1.JobRunningReason)))
		}).Should(Succeed())

		By("the apply ends: counted as any other")
		st := statetest.Cluster("10.0.0.1", 6443)
		Expect(statetest.Write(ctx, k8s, f.ns, suffixOf(tc, infrav1.TerraformClusterKind), st)).To(Succeed())
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, job)).To(Succeed())
		job.Status.Ready = ptrTo[int32](0) // the Job controller's count once the pod ended
		Expect(envtest.FinishJob(ctx, k8s, job, pod, true, result(infrav1.OperationApply, true, ""))).To(Succeed())
		Eventually(func(g Gomega) {
			get(tc)
			g.Expect(envtest.Condition(tc, infrav1.ApplyJobSucceededCondition)).To(HaveField("Reason", infrav1.JobSucceededReason))
		}).Should(Succeed())
	})
})
