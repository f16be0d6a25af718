package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Cluster API's contract lets someone else manage an infrastructure cluster
// (docs/lifecycle.md, "Externally managed clusters"); the real Cluster API core manager reads
// what that someone writes.
var _ = Describe("An externally managed TerraformCluster under the real Cluster API", func() {
	It("is left alone by CAPTF, provisioned by its manager as Cluster API reads it, refused on a cluster CAPTF applied, and deleted without a destroy", func() {
		const ns, name, mine = "managedby", "ext", "mine"
		createNamespace(shared, ns)
		marked := func(doc string) string {
			return strings.Replace(doc, "kind: TerraformCluster\nmetadata:\n",
				"kind: TerraformCluster\nmetadata:\n  annotations:\n    "+infrav1.ManagedByAnnotation+": e2e\n", 1)
		}
		applyFixtureEdited(shared, ns, "cluster.yaml", name, 0, marked)

		By("CAPTF leaves it alone: no finalizer, no condition, no run, while Cluster API waits for it")
		Consistently(func(g Gomega) {
			o := tc(ns, name)
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Finalizers).To(BeEmpty())
			g.Expect(o.Status.Conditions).To(BeEmpty())
			g.Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, "")).To(BeEmpty())
		}, 5*time.Second, 250*time.Millisecond).Should(Succeed())

		By("its manager (here kubectl) writes the endpoint and provisioned; Cluster API takes both")
		kubectl(shared, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p",
			`{"spec":{"controlPlaneEndpoint":{"host":"ext.example.internal","port":6443}}}`)
		kubectl(shared, "patch", "-n", ns, "terraformcluster", name, "--subresource=status", "--type=merge", "-p",
			`{"status":{"initialization":{"provisioned":true}}}`)
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
			g.Expect(c.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
			g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal("ext.example.internal"))
		}, time.Minute).Should(Succeed())
		Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, "")).To(BeEmpty())

		By("the mark on a cluster CAPTF applied is refused, with what to do instead")
		applyFixture(shared, ns, "cluster.yaml", mine, 0)
		eventuallyReady(shared, tc(ns, mine))
		out, err := run(shared.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", mine, infrav1.ManagedByAnnotation+"=e2e")
		Expect(err).To(HaveOccurred(), "kubectl marked a cluster CAPTF applied: %s", out)
		Expect(out).To(ContainSubstring("mark an infrastructure cluster as managed by someone else when you create it"))

		By("deleting the marked Cluster runs no destroy: nothing of CAPTF holds it")
		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=2m")
		Expect(kubectl(shared, "get", "terraformcluster", "-n", ns, name, "--ignore-not-found", "-o", "name")).To(BeEmpty())
		Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, "")).To(BeEmpty())
		kubectl(shared, "delete", "cluster", "-n", ns, mine, "--timeout=5m")
		Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformClusterKind, ns, mine, infrav1.OperationDestroy)).To(HaveLen(1))
	})
})
