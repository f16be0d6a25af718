package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The Secret volumes of spec.job.podTemplate, before every Job", func() {
	It("holds an object once a Secret volume became a service-account-token Secret, with a reason and one event, and runs again once it names another Secret", func() {
		// The suite runs no webhook: this is the engine's own line, which also catches a
		// Secret replaced by a ServiceAccount token after admission.
		f := newFixture()
		secret := func(name string, t corev1.SecretType) *corev1.Secret {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Type: t}
			if t == corev1.SecretTypeServiceAccountToken {
				s.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
			} else {
				s.StringData = map[string]string{"token": "registry"}
			}
			return s
		}
		Expect(k8s.Create(ctx, secret("creds", corev1.SecretTypeOpaque))).To(Succeed())
		tc := &infrav1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.cluster, Labels: f.labels()},
			Spec:       infrav1.TerraformClusterSpec{TerraformSpec: moduleSpec(`{"size":1}`)},
		}
		tc.Spec.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{
			{Name: "creds", MountPath: "/etc/creds", Secret: &infrav1.RunnerVolumeSource{Name: "creds"}}}}
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("an Opaque Secret: the apply runs, the volume mounted read-only into the main container alone")
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		pod := job.Spec.Template.Spec
		Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "creds"), HaveField("Secret.SecretName", "creds"))))
		Expect(pod.Containers[0].Name).To(Equal(jobs.MainContainer))
		Expect(pod.Containers[0].VolumeMounts).To(ContainElement(And(HaveField("Name", "creds"), HaveField("ReadOnly", true))))
		for _, c := range pod.InitContainers {
			Expect(c.VolumeMounts).NotTo(ContainElement(HaveField("Name", "creds")), c.Name)
		}
		st := statetest.Cluster("10.0.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("the Secret replaced by a ServiceAccount token: the next apply does not start")
		Expect(k8s.Delete(ctx, secret("creds", corev1.SecretTypeOpaque))).To(Succeed())
		Expect(k8s.Create(ctx, secret("creds", corev1.SecretTypeServiceAccountToken))).To(Succeed())
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.PodTemplateSecretRefusedReason),
			HaveField("Message", And(ContainSubstring("volumes[0] (creds) mounts the Secret creds"), ContainSubstring("remove the volume")))))
		kit.Poke(tc)
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))

		By("one Warning event for the transition, not one per pass")
		Eventually(func() int { return warningEvents(f.ns, tc.Name, infrav1.PodTemplateSecretRefusedReason) }).Should(Equal(1))

		By("the volume names an Opaque Secret again: the apply runs")
		Expect(k8s.Create(ctx, secret("creds-2", corev1.SecretTypeOpaque))).To(Succeed())
		update(tc, func(tc *infrav1.TerraformCluster) { tc.Spec.Job.PodTemplate.Volumes[0].Secret.Name = "creds-2" })
		job = waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(job.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "creds-2")))
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(warningEvents(f.ns, tc.Name, infrav1.PodTemplateSecretRefusedReason)).To(Equal(1))
	})
})
