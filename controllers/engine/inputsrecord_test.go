package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// setBootstrapData rewrites the content of a member's bootstrap data Secret.
func setBootstrapData(ns, name, value string) {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-bootstrap"}, s)).To(Succeed())
	s.Data = map[string][]byte{"value": []byte(value)}
	Expect(k8s.Update(ctx, s)).To(Succeed())
}

// settled waits until the object's pass saw its latest generation (a first apply writes
// contract fields into the spec, and the pass after it reads the inputs again) and it is Ready
// with its inputs applied, and returns its record of the inputs' sources (nil: none).
func settled(o client.Object) *infrav1.InputsRecord {
	GinkgoHelper()
	var rec *infrav1.InputsRecord
	Eventually(func(g Gomega) {
		c := fresh(o)
		st := c.GetTerraformStatus()
		g.Expect(st.ObservedGeneration).To(Equal(c.GetGeneration()))
		g.Expect(envtest.Condition(c, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		g.Expect(c.GetAnnotations()).To(HaveKey(infrav1.AppliedHashAnnotation))
		rec = st.Inputs
		if rec != nil {
			g.Expect(rec.Generation).To(Equal(c.GetGeneration()))
			g.Expect(rec.Hash).To(Equal(c.GetAnnotations()[infrav1.AppliedHashAnnotation]))
		}
	}).Should(Succeed())
	return rec
}

// pastInputsTTL moves the manager's clock past the time an inputs hash is remembered (10
// minutes), so the next pass can only reuse a hash through status.inputs.
func pastInputsTTL() { clk.Step(11 * time.Minute) }

var _ = Describe("The record of the inputs' sources (status.inputs)", func() {
	It("notices new bootstrap data from its Secret's resourceVersion, and records what each hash came from", func() {
		f := newFixture()
		f.provisionCluster()
		tm := f.createMachine("m1")
		job1 := waitForJob(tm, infrav1.TerraformMachineKind, 1)
		st := statetest.Machine("tf://vm-1")
		completeJob(job1, &st, true, "")
		first := *settled(tm)
		Expect(first.Hash).To(Equal(job1.Annotations[infrav1.InputsHashAnnotation]))

		By("an idle pass past the inputs TTL trusts the record: no Job")
		pastInputsTTL()
		kit.Poke(tm)
		Consistently(func() int { return len(kit.JobsOf(tm, infrav1.TerraformMachineKind)) }, "2s").Should(Equal(1))

		By("new bootstrap data: its Secret's event and resourceVersion start an apply with the new content")
		setBootstrapData(f.ns, "m1", "#cloud-config, second edition")
		job2 := waitForJob(tm, infrav1.TerraformMachineKind, 2)
		Expect(job2.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(job2.Annotations[infrav1.InputsHashAnnotation]).NotTo(Equal(first.Hash))
		completeJob(job2, &st, true, "")
		Eventually(func(g Gomega) {
			o := get(tm)
			g.Expect(o.Status.Inputs).NotTo(BeNil())
			g.Expect(o.Status.Inputs.Hash).To(Equal(job2.Annotations[infrav1.InputsHashAnnotation]))
			g.Expect(o.Status.Inputs.Sources).NotTo(Equal(first.Sources))
		}).Should(Succeed())
	})

	It("notices a new cluster state from its Secret's resourceVersion", func() {
		f := newFixture()
		tc := f.provisionCluster()
		tm := f.createMachine("m1")
		st := statetest.Machine("tf://vm-1")
		completeJob(waitForJob(tm, infrav1.TerraformMachineKind, 1), &st, true, "")
		Expect(settled(tm)).NotTo(BeNil())

		By("the cluster's apply writes a state with a new output; the machine's idle record no longer matches")
		cst := statetest.Cluster("10.1.0.1", 6443)
		cst.Serial = 2
		cst.Outputs["subnet_id"] = statetest.Output{Value: "subnet-2"}
		Expect(statetest.Write(ctx, k8s, f.ns, suffixOf(tc, infrav1.TerraformClusterKind), cst)).To(Succeed())
		pastInputsTTL()
		kit.Poke(tm)
		job2 := waitForJob(tm, infrav1.TerraformMachineKind, 2)
		Expect(job2.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
	})

	It("records nothing for an unlabelled bootstrap data Secret, and reads it again after the inputs TTL", func() {
		f := newFixture()
		f.unlabelledBootstrap = true
		f.provisionCluster()
		tm := f.createMachine("m1")
		job1 := waitForJob(tm, infrav1.TerraformMachineKind, 1)
		st := statetest.Machine("tf://vm-1")
		completeJob(job1, &st, true, "")
		Expect(settled(tm)).To(BeNil(), "no metadata cache shows the Secret: nothing proves a record still holds")

		setBootstrapData(f.ns, "m1", "#cloud-config, second edition")
		kit.Poke(tm)
		Consistently(func() int { return len(kit.JobsOf(tm, infrav1.TerraformMachineKind)) }, "2s").Should(Equal(1),
			"within the TTL the remembered hash stands")
		pastInputsTTL()
		kit.Poke(tm)
		Expect(waitForJob(tm, infrav1.TerraformMachineKind, 2).Annotations[infrav1.InputsHashAnnotation]).NotTo(
			Equal(job1.Annotations[infrav1.InputsHashAnnotation]))
	})

	It("records nothing for variables read from a Secret, and reads them again after the inputs TTL", func() {
		f := newFixture()
		vars := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "vars",
			Labels: map[string]string{inputs.VariablesLabel: inputs.VariablesLabelValue}},
			Data: map[string][]byte{"region": []byte("north")}}
		Expect(k8s.Create(ctx, vars)).To(Succeed())
		tc := f.terraformCluster().Spec(func(s *infrav1.TerraformSpec) {
			s.VariablesFrom = []infrav1.VariablesSource{{SecretRef: &infrav1.LocalObjectReference{Name: vars.Name}}}
		}).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		job1 := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		st := statetest.Cluster("10.1.0.1", 6443)
		completeJob(job1, &st, true, "")
		Expect(settled(tc)).To(BeNil(), "no cache holds a variables Secret: nothing proves a record still holds")

		vars.Data = map[string][]byte{"region": []byte("south")}
		Expect(k8s.Update(ctx, vars)).To(Succeed())
		pastInputsTTL()
		kit.Poke(tc)
		Expect(waitForJob(tc, infrav1.TerraformClusterKind, 2).Annotations[infrav1.InputsHashAnnotation]).NotTo(
			Equal(job1.Annotations[infrav1.InputsHashAnnotation]))
	})
})
