package engine_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// kindCase drives the same lifecycle through each kind.
type kindCase struct {
	kind   string
	create func(f *fixture) client.Object
	state  statetest.State
}

type terraformObject interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
	GetConditions() []metav1.Condition
}

func fresh(o client.Object) terraformObject {
	GinkgoHelper()
	c := o.DeepCopyObject().(terraformObject)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), c)).To(Succeed())
	return c
}

var _ = DescribeTable("Every kind through apply, input change, failure with backoff, and destroy",
	func(kc kindCase) {
		f := newFixture()
		o := kc.create(f)
		suffix := suffixOf(o, kc.kind)

		By("apply: contract fields, Ready and the outputs Secret")
		completeJob(waitForJob(o, kc.kind, 1), &kc.state, true, "")
		Eventually(func(g Gomega) {
			c := fresh(o)
			g.Expect(c.GetTerraformStatus().IsProvisioned()).To(BeTrue())
			g.Expect(envtest.Condition(c, infrav1.ReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(secretExists(f.ns, naming.OutputsSecretName(suffix))).To(BeTrue(), "outputs are offered to users in a Secret")

		By("changed inputs: exactly one new apply")
		update(o, func(c client.Object) {
			c.(terraformObject).GetTerraformSpec().Variables = &runtime.RawExtension{Raw: []byte(`{"changed":1}`)}
		})
		job2 := waitForJob(o, kc.kind, 2)
		Consistently(func() int { return len(kit.JobsOf(o, kc.kind)) }, "2s").Should(Equal(2))

		By("failure: the runner's reason in the condition, no retry inside the backoff, retry after it")
		completeJob(job2, nil, false, "Error: provider quota exceeded for this "+kc.kind)
		Eventually(func(g Gomega) {
			c := envtest.Condition(fresh(o), infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.JobFailedReason))
			g.Expect(c.Message).To(ContainSubstring("provider quota exceeded"))
		}).Should(Succeed())
		Expect(fresh(o).GetAnnotations()).To(HaveKeyWithValue(infrav1.FailuresAnnotation, "1"))
		Consistently(func() int { return len(kit.JobsOf(o, kc.kind)) }, "2s").Should(Equal(2))
		clk.Step(61 * time.Second)
		kit.Poke(o)
		completeJob(waitForJob(o, kc.kind, 3), &kc.state, true, "")
		Eventually(func() string { return fresh(o).GetAnnotations()[infrav1.AppliedHashAnnotation] }).Should(
			Equal(job2.Annotations[infrav1.InputsHashAnnotation]))

		By("delete: destroy, then state, inputs, outputs and leases go, then the object")
		Expect(k8s.Delete(ctx, o)).To(Succeed())
		destroy := waitForJob(o, kc.kind, 4)
		Expect(destroy.Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationDestroy)))
		empty := statetest.Destroyed()
		completeJob(destroy, &empty, true, "")
		Eventually(kit.Gone(o)).Should(BeTrue())
		for _, name := range []string{naming.StateSecretName(suffix), naming.InputsSecretName(suffix), naming.OutputsSecretName(suffix)} {
			Expect(secretExists(f.ns, name)).To(BeFalse(), "%s must be gone", name)
		}
		for _, l := range leasesOf(f.ns) {
			Expect(naming.OwnedBy(l.Labels, kc.kind, o.GetName())).To(BeFalse(), "lease %s of the deleted object remains", l.Name)
		}
	},
	Entry("TerraformCluster", kindCase{kind: infrav1.TerraformClusterKind,
		create: func(f *fixture) client.Object { return f.createCluster() }, state: statetest.Cluster("10.5.0.1", 6443)}),
	Entry("TerraformMachine", kindCase{kind: infrav1.TerraformMachineKind,
		create: func(f *fixture) client.Object { f.provisionCluster(); return f.createMachine("m1") }, state: statetest.Machine("tf://vm-7")}),
	Entry("TerraformMachinePool", kindCase{kind: infrav1.TerraformMachinePoolKind,
		create: func(f *fixture) client.Object { f.provisionCluster(); return f.createPool("p1") }, state: statetest.MachinePool("tf://p-0", "tf://p-1")}),
)
