package engine_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("Secrets that reach module code, before every Job", func() {
	It("copies only judged Secrets into the Job, holds the object when one loses its label or becomes a ServiceAccount token after admission, and masks their values", func() {
		// The suite runs no webhook: this is the engine's own line, which also catches a
		// Secret changed after admission.
		f := newFixture()
		labelled := map[string]string{infrav1.VariablesLabel: "true"}
		envSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud", Labels: labelled},
			Data: map[string][]byte{"key": []byte("cl0ud-key-value")}}
		volSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ca", Labels: labelled},
			Data: map[string][]byte{"ca.pem": []byte("ca-bundle-value"), "extra": []byte("extra-value")}}
		Expect(k8s.Create(ctx, envSecret)).To(Succeed())
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.Env = []corev1.EnvVar{{Name: "CLOUD_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cloud"}, Key: "key"}}}}
			s.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{
				{Name: "ca", MountPath: "/etc/ca", Secret: &infrav1.RunnerVolumeSource{Name: "ca"}}}}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }
		jobCount := func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }

		By("the volume's Secret does not exist: InputsSourceMissing, and no Job whose pod would wait for it")
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.InputsSourceMissingReason),
			HaveField("Message", ContainSubstring("spec.job.podTemplate.volumes[0].secret.name names Secret "+f.ns+"/ca"))))
		Consistently(jobCount, "2s").Should(BeZero())

		By("created: the apply runs, and its pod names only the Job's own copies")
		Expect(k8s.Create(ctx, volSecret)).To(Succeed())
		kit.Poke(tc)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		// PodSecretNames: "ca" is copy 0, "cloud" copy 1.
		caCopy, cloudCopy := naming.RunModuleSecretName(job.Name, 0), naming.RunModuleSecretName(job.Name, 1)
		pod := job.Spec.Template.Spec
		Expect(pod.Containers[0].Name).To(Equal(jobs.MainContainer))
		Expect(pod.Containers[0].Env).To(ContainElement(And(HaveField("Name", "CLOUD_KEY"),
			HaveField("ValueFrom.SecretKeyRef.Name", cloudCopy), HaveField("ValueFrom.SecretKeyRef.Key", "key"))))
		Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "ca"), HaveField("Secret.SecretName", caCopy))))
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				Expect(v.Secret.SecretName).NotTo(BeElementOf("cloud", "ca"), "the pod names a Secret of the object's author")
			}
		}
		copyOf := func(name string) *corev1.Secret {
			s := &corev1.Secret{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, s)).To(Succeed())
			return s
		}
		var cloud *corev1.Secret
		Eventually(func() bool { return secretExists(f.ns, naming.RunSecretName(job.Name)) }).Should(BeTrue())
		cloud = copyOf(cloudCopy)
		Expect(cloud.Data).To(Equal(map[string][]byte{"key": []byte("cl0ud-key-value")}), "only the key module code receives")
		Expect(cloud.Immutable).To(HaveValue(BeTrue()))
		Expect(cloud.Type).To(Equal(corev1.SecretTypeOpaque))
		Expect(metav1.GetControllerOf(cloud)).To(And(Not(BeNil()), HaveField("UID", job.UID)))
		Expect(copyOf(caCopy).Data).To(HaveLen(2), "a volume without items receives every key")
		var redact []string
		Expect(json.Unmarshal(copyOf(naming.RunSecretName(job.Name)).Data[inputs.RedactKey], &redact)).To(Succeed())
		Expect(redact).To(ContainElements("cl0ud-key-value", "ca-bundle-value", "extra-value"))

		By("after the Job was created, its Secret is replaced by a ServiceAccount token: the Job's copy keeps what was judged")
		Expect(k8s.Delete(ctx, envSecret)).To(Succeed())
		token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud", Labels: labelled,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
		Expect(k8s.Create(ctx, token)).To(Succeed())
		Expect(copyOf(cloudCopy).Data).To(Equal(map[string][]byte{"key": []byte("cl0ud-key-value")}))
		st := statetest.Cluster("10.0.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())

		By("the next apply: the token Secret holds the object with ModuleSecretRefused, one Warning event, no Job")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		Eventually(inputsValid).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.ModuleSecretRefusedReason),
			HaveField("Message", And(ContainSubstring("spec.job.env[0].valueFrom.secretKeyRef.name"), ContainSubstring("ServiceAccount token"),
				ContainSubstring("name a Secret of another type")))))
		kit.Poke(tc)
		Consistently(jobCount, "2s").Should(Equal(1))
		Eventually(func() int { return warningEvents(f.ns, tc.Name, infrav1.ModuleSecretRefusedReason) }).Should(Equal(1))

		By("an Opaque Secret again, but without the opt-in label: VariablesSourceNotOptedIn, naming the command, no Job")
		Expect(k8s.Delete(ctx, token)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud"},
			Data: map[string][]byte{"key": []byte("n3w-cl0ud-key")}})).To(Succeed())
		kit.Poke(tc)
		Eventually(inputsValid).Should(And(HaveField("Reason", infrav1.VariablesSourceNotOptedInReason),
			HaveField("Message", ContainSubstring("kubectl label secret cloud -n "+f.ns+" captf.io/variables=true"))))
		Expect(inputsValid().Message).NotTo(ContainSubstring("n3w-cl0ud-key"))
		Consistently(jobCount, "2s").Should(Equal(1))

		By("labelled: the apply runs with the new value in its copy")
		update(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud"}}, func(s *corev1.Secret) {
			s.Labels = labelled
		})
		kit.Poke(tc)
		job = waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Eventually(func() bool { return secretExists(f.ns, naming.RunSecretName(job.Name)) }).Should(BeTrue())
		Expect(copyOf(naming.RunModuleSecretName(job.Name, 1)).Data).To(Equal(map[string][]byte{"key": []byte("n3w-cl0ud-key")}))
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))
	})
})
