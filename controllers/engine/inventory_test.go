package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// inventoryOf reads the object's inventory Secret; nil while it does not exist.
func inventoryOf(g Gomega, ns, suffix string) (*corev1.Secret, *state.Inventory) {
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.InventorySecretName(suffix)}, s); err != nil {
		return nil, nil
	}
	inv, err := state.ParseInventory(s.Data)
	g.Expect(err).NotTo(HaveOccurred())
	return s, inv
}

func addresses(inv *state.Inventory) []string {
	var out []string
	for _, r := range inv.Resources {
		out = append(out, r.Address)
	}
	return out
}

var _ = Describe("The inventory Secret", func() {
	It("lists what each apply left in the state, writes nothing on an idle pass, and goes with the destroy", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)

		By("a first apply that leaves three managed resources and a data source")
		st := statetest.Cluster("10.7.0.1", 6443)
		st.Managed, st.DataSources = 3, 1
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &st, true, "")
		var first *corev1.Secret
		Eventually(func(g Gomega) {
			s, inv := inventoryOf(g, f.ns, suffix)
			g.Expect(inv).NotTo(BeNil(), "the inventory Secret is written")
			g.Expect(addresses(inv)).To(Equal([]string{"data.terraform_remote_state.d0", "terraform_data.r0", "terraform_data.r1", "terraform_data.r2"}))
			g.Expect(inv.Total).To(Equal(4))
			g.Expect(inv.Managed).To(Equal(3))
			g.Expect(inv.Truncated).To(BeFalse())
			g.Expect(inv.Serial).To(BeEquivalentTo(1))
			g.Expect(inv.Lineage).To(Equal(statetest.DefaultLineage))
			first = s
		}).Should(Succeed())
		Expect(first.Labels).To(HaveKeyWithValue(infrav1.SecretRoleLabel, state.InventoryRole))
		Expect(first.Labels).To(HaveKey(infrav1.MoveLabel))
		Expect(naming.OwnedBy(first.Labels, infrav1.TerraformClusterKind, tc.Name)).To(BeTrue())
		Expect(metav1.GetControllerOf(first)).To(HaveField("UID", get(tc).UID), "the inventory goes with the object")
		Expect(first.Data).To(HaveLen(1))

		By("an idle pass leaves the Secret as it is")
		kit.Poke(tc)
		Eventually(func() string { return get(tc).Annotations["test.captf.io/poke"] }).ShouldNot(BeEmpty())
		Consistently(func(g Gomega) string {
			s, _ := inventoryOf(g, f.ns, suffix)
			g.Expect(s).NotTo(BeNil())
			return s.ResourceVersion
		}, "2s").Should(Equal(first.ResourceVersion))

		By("a later apply that removes a resource: it is gone from the inventory")
		update(tc, func(tc *infrav1.TerraformCluster) {
			tc.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
		})
		st.Serial, st.Managed = 2, 2
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 2), &st, true, "")
		Eventually(func(g Gomega) {
			_, inv := inventoryOf(g, f.ns, suffix)
			g.Expect(inv).NotTo(BeNil())
			g.Expect(inv.Serial).To(BeEquivalentTo(2))
			g.Expect(addresses(inv)).To(Equal([]string{"data.terraform_remote_state.d0", "terraform_data.r0", "terraform_data.r1"}))
			g.Expect(inv.Total).To(Equal(3))
		}).Should(Succeed())

		By("the destroy's cleanup deletes it")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		empty := statetest.Destroyed()
		empty.Serial = 3
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 3), &empty, true, "")
		Eventually(func() bool { return secretExists(f.ns, naming.InventorySecretName(suffix)) }).Should(BeFalse())
	})

	It("lists the state of an apply whose outputs do not fit the contract", func() {
		f := newFixture()
		tc := f.createCluster()
		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		noEndpoint := statetest.State{Managed: 2}
		completeJob(waitForJob(tc, infrav1.TerraformClusterKind, 1), &noEndpoint, true, "")
		Eventually(func(g Gomega) {
			c := envtest.Condition(get(tc), infrav1.OutputsValidCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.OutputMissingReason))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			_, inv := inventoryOf(g, f.ns, suffix)
			g.Expect(inv).NotTo(BeNil())
			g.Expect(addresses(inv)).To(Equal([]string{"terraform_data.r0", "terraform_data.r1"}))
		}).Should(Succeed())
		Expect(secretExists(f.ns, naming.OutputsSecretName(suffix))).To(BeFalse(), "no outputs Secret for outputs the contract refuses")
	})
})
