package engine_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// identityNamespace plays the manager's namespace (setup.Options.IdentityNamespace): the
// Secrets of TerraformIdentities live there.
const identityNamespace = "engine-identities"

// identitySecret creates, once, the namespace identityNamespace and the Secret name in it with
// the key token.
func identitySecret(name, token string) {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: identityNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Fail(err.Error())
	}
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: identityNamespace, Name: name},
		Data: map[string][]byte{"token": []byte(token)}})).To(Succeed())
}

var _ = Describe("A TerraformIdentity, before every Job", func() {
	It("holds an object whose namespace lost the label its identity selects, with a reason and one event, and runs once it is back", func() {
		// The suite runs no webhook: this is the engine's own line, which also catches a
		// namespace relabelled after admission.
		f := newFixture()
		tenant := map[string]string{"captf-test/tenant": f.ns}
		labelNamespace := func(l map[string]string) {
			GinkgoHelper()
			ns := &corev1.Namespace{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: f.ns}, ns)).To(Succeed())
			ns.Labels = l
			Expect(k8s.Update(ctx, ns)).To(Succeed())
		}
		labelNamespace(tenant)
		identitySecret("cloud-"+f.ns, "s3cr3t-"+f.ns)
		id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: "team-" + f.ns}, Spec: infrav1.TerraformIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: tenant}},
			Env:               []infrav1.IdentityEnvVar{{Name: "CLOUD_TOKEN", SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "cloud-" + f.ns, Key: "token"}}},
		}}
		Expect(k8s.Create(ctx, id)).To(Succeed())
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: id.Name}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("allowed: the Job reads CLOUD_TOKEN from its per-run identity Secret, which holds the value from the manager's namespace")
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		main := job.Spec.Template.Spec.Containers[0]
		Expect(main.Name).To(Equal(jobs.MainContainer))
		Expect(main.Env).To(ContainElement(And(HaveField("Name", "CLOUD_TOKEN"),
			HaveField("ValueFrom.SecretKeyRef.Name", naming.RunIdentitySecretName(job.Name)), HaveField("ValueFrom.SecretKeyRef.Key", "CLOUD_TOKEN"))))
		runIdentity := &corev1.Secret{}
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunIdentitySecretName(job.Name)}, runIdentity)
		}).Should(Succeed())
		Expect(runIdentity.Data).To(Equal(map[string][]byte{"CLOUD_TOKEN": []byte("s3cr3t-" + f.ns)}))
		Expect(metav1.GetControllerOf(runIdentity).UID).To(Equal(job.UID), "owned by the Job: it goes with it")
		By("the runner masks the value: it is on the per-run Secret's redact list, and never in the durable inputs")
		run := &corev1.Secret{}
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunSecretName(job.Name)}, run)
		}).Should(Succeed())
		var redact []string
		Expect(json.Unmarshal(run.Data[inputs.RedactKey], &redact)).To(Succeed())
		Expect(redact).To(ContainElement("s3cr3t-" + f.ns))
		durable := &corev1.Secret{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.InputsSecretName(suffixOf(tc, infrav1.TerraformClusterKind))}, durable)).To(Succeed())
		for k, v := range durable.Data {
			Expect(string(v)).NotTo(ContainSubstring("s3cr3t-"+f.ns), "durable inputs key %s", k)
		}

		By("the per-run identity Secret is deleted once the Job is counted")
		st := statetest.Cluster("10.0.0.1", 6443)
		completeJob(job, &st, true, "")
		Eventually(func() bool { return secretExists(f.ns, naming.RunIdentitySecretName(job.Name)) }).Should(BeFalse())
		Eventually(func() *infrav1.ActiveJob { return get(tc).Status.ActiveJob }).Should(BeNil())

		By("the namespace loses the label: the next run is held with IdentityNotAllowed, naming the identity and the namespace; no Job")
		labelNamespace(nil)
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		inputsValid := func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }
		Eventually(inputsValid).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.IdentityNotAllowedReason),
			HaveField("Message", And(ContainSubstring("TerraformIdentity "+id.Name), ContainSubstring("namespace "+f.ns)))))
		kit.Poke(tc)
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(Equal(1))

		By("one Warning event for the transition, not one per pass")
		Eventually(func() int { return warningEvents(f.ns, tc.Name, infrav1.IdentityNotAllowedReason) }).Should(Equal(1))

		By("the label is back: the apply runs")
		labelNamespace(tenant)
		kit.Poke(tc)
		job2 := waitForJob(tc, infrav1.TerraformClusterKind, 2)
		Eventually(inputsValid).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(warningEvents(f.ns, tc.Name, infrav1.IdentityNotAllowedReason)).To(Equal(1))
		completeJob(job2, &st, true, "")
		Eventually(func() *infrav1.ActiveJob { return get(tc).Status.ActiveJob }).Should(BeNil())

		By("a destroy is held the same way: the namespace loses the label, the object is deleted, no destroy Job")
		labelNamespace(nil)
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(inputsValid).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.IdentityNotAllowedReason)))
		destroys := func() int {
			n := 0
			for _, j := range kit.JobsOf(tc, infrav1.TerraformClusterKind) {
				if j.Labels[infrav1.OperationLabel] == string(infrav1.OperationDestroy) {
					n++
				}
			}
			return n
		}
		Consistently(destroys, "2s").Should(BeZero())

		By("the label is back: the destroy runs with the identity")
		labelNamespace(tenant)
		kit.Poke(tc)
		destroy := waitForJob(tc, infrav1.TerraformClusterKind, 3)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		Expect(jobs.ReadsRunIdentitySecret(destroy)).To(BeTrue())
	})

	It("holds an object whose identity's Secret is missing in the manager's namespace, and never reads the tenant's", func() {
		f := newFixture()
		identitySecret("present-"+f.ns, "unused")
		// A Secret of the same name in the tenant's namespace must not stand in for it.
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "absent-" + f.ns},
			Data: map[string][]byte{"token": []byte("tenant")}})).To(Succeed())
		id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: "broken-" + f.ns}, Spec: infrav1.TerraformIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{f.ns}},
			Env:               []infrav1.IdentityEnvVar{{Name: "CLOUD_TOKEN", SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "absent-" + f.ns, Key: "token"}}},
		}}
		Expect(k8s.Create(ctx, id)).To(Succeed())
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: id.Name}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		Eventually(func() *metav1.Condition { return envtest.Condition(get(tc), infrav1.InputsValidCondition) }).Should(And(Not(BeNil()),
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.IdentityInvalidReason),
			HaveField("Message", ContainSubstring("Secret "+identityNamespace+"/absent-"+f.ns+", which does not exist"))))
		kit.Poke(tc)
		Consistently(func() int { return len(kit.JobsOf(tc, infrav1.TerraformClusterKind)) }, "2s").Should(BeZero())

		By("the platform fixes the identity: the apply runs")
		Eventually(func() error {
			fresh := &infrav1.TerraformIdentity{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(id), fresh); err != nil {
				return err
			}
			fresh.Spec.Env[0].SecretKeyRef.Name = "present-" + f.ns
			return k8s.Update(ctx, fresh)
		}).Should(Succeed())
		kit.Poke(tc)
		waitForJob(tc, infrav1.TerraformClusterKind, 1)
	})
})
