package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The sources of spec.job.cliConfig", func() {
	It("hold the object, and its destroy, until each exists and opted in, then reach the Job's terraform container alone", func() {
		f := newFixture()
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.CLIConfig = &infrav1.CLIConfig{
				ConfigMapRef: &infrav1.CLIConfigKeyRef{Name: "terraform-cli", Key: "config.tfrc"},
				Credentials: []infrav1.RegistryCredential{{Host: "registry.example.com",
					SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "registry-token", Key: "token"}}},
			}
		}).Obj()
		// The ConfigMap has not opted in either, at first: only the engine's live check of the
		// CLI configuration's sources judges a ConfigMap (the rule for Secrets that reach module
		// code judges the Secret too).
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "terraform-cli", Labels: map[string]string{"app": "ci"}},
			Data: map[string]string{"config.tfrc": "provider_installation {\n  direct {}\n}\n"}}
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		// Another workload's Secret: it has not opted in.
		token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "registry-token", Labels: map[string]string{"app": "ci"}},
			Data: map[string][]byte{"token": []byte("t0ken-value")}}
		Expect(k8s.Create(ctx, token)).To(Succeed())
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }

		By("a ConfigMap without the label: VariablesSourceNotOptedIn, naming it, no Job")
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.VariablesSourceNotOptedInReason),
			HaveField("Message", ContainSubstring("spec.job.cliConfig.configMapRef (ConfigMap "+f.ns+"/terraform-cli)"))))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeZero())
		update(cm, func(c *corev1.ConfigMap) { c.Labels[infrav1.VariablesLabel] = "true" })
		kit.Poke(tc)

		By("a credential Secret without the label: VariablesSourceNotOptedIn, naming the command, no Job")
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.VariablesSourceNotOptedInReason),
			HaveField("Message", ContainSubstring("kubectl label secret registry-token -n "+f.ns+" captf.io/variables=true"))))
		Expect(inputsValid().Message).NotTo(ContainSubstring("t0ken-value"))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeZero())

		By("labelled: the apply runs, its terraform container alone has the file and the token (from the Job's copy)")
		update(token, func(s *corev1.Secret) { s.Labels[infrav1.VariablesLabel] = "true" })
		kit.Poke(tc)
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		main := job.Spec.Template.Spec.Containers[0]
		Expect(main.Env).To(ContainElements(
			HaveField("Name", jobs.EnvCLIConfigFile),
			And(HaveField("Name", "TF_TOKEN_registry_example_com"), HaveField("ValueFrom.SecretKeyRef.Name", naming.RunModuleSecretName(job.Name, 0)))))
		for _, c := range job.Spec.Template.Spec.InitContainers {
			Expect(c.Env).NotTo(ContainElement(HaveField("Name", HavePrefix("TF_"))), c.Name)
		}
		Expect(job.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", jobs.VolumeCLIConfig),
			HaveField("ConfigMap.Name", "terraform-cli"))))
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))

		By("applied; then the credential Secret loses its label: the destroy waits for it too")
		st := statetest.Cluster("10.0.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
		update(token, func(s *corev1.Secret) { delete(s.Labels, infrav1.VariablesLabel) })
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(inputsValid).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.VariablesSourceNotOptedInReason)))
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1),
			"no destroy Job while a source of its CLI configuration has not opted in")

		By("labelled again: the destroy runs with the token, and the object goes")
		update(token, func(s *corev1.Secret) { s.Labels[infrav1.VariablesLabel] = "true" })
		kit.Poke(tc)
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		Expect(destroy.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", "TF_TOKEN_registry_example_com")))
		empty := statetest.Destroyed()
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(tc)).Should(BeTrue())
	})
})
