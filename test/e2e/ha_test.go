package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// A highly available control plane and a Kubernetes version upgrade of a ClusterClass cluster
// (issue 44), under the sandbox's real Cluster API core, kubeadm bootstrap and kubeadm control
// plane managers. The control plane's etcd is external (the class's externalEtcdEndpoints), as
// the sandbox plays no etcd members.
var _ = Describe("A highly available control plane and a version upgrade under the real Cluster API", func() {
	It("scales the kubeadm control plane 1 -> 3 -> 1 and upgrades the Cluster's version, control plane first, then the workers, each replacement applied before its predecessor is destroyed, each machine applied and destroyed once", func() {
		const ns, name = "ha", "ha"
		const from, to = "v1.36.0", "v1.36.1"
		checkInvariants := watchInvariants(shared, ns)
		createNamespace(shared, ns)
		kubectl(shared, "apply", "-n", ns, "-f", filepath.Join(repo, "config", "samples", "modules.yaml"))
		kubectl(shared, "apply", "-n", ns, "-k", filepath.Join(repo, "templates"))
		GinkgoT().Setenv("CAPTF_POOL_REPLICAS", "1")
		out, err := run(shared.Kubeconfig(), "clusterctl", "generate", "cluster", name, "--from", filepath.Join(repo, "templates", "cluster-template-topology.yaml"),
			"--target-namespace", ns, "--kubernetes-version", from, "--control-plane-machine-count", "1", "--worker-machine-count", "2")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(out).To(ContainSubstring("    variables:\n"))
		out = strings.Replace(out, "    variables:\n", "    variables:\n    - name: externalEtcdEndpoints\n      value: [\"https://etcd.sandbox.invalid:2379\"]\n", 1)
		generated := filepath.Join(GinkgoT().TempDir(), "cluster.yaml")
		Expect(os.WriteFile(generated, []byte(out), 0o600)).To(Succeed())
		kubectl(shared, "apply", "-f", generated)

		By("one control plane machine, 2 workers and a pool of 1 come up, and the Cluster is Available")
		eventuallyAvailable(ns, name)
		md := topologyObject(ns, name, &clusterv1.MachineDeploymentList{}, clusterv1.ClusterTopologyMachineDeploymentNameLabel, "md-0")
		oldWorkers := eventuallyWorkers(ns, md, 2, "")
		one := eventuallyControlPlane(ns, name, 1, from)

		By("the control plane scales to 3: two more machines applied, the Cluster stays Available")
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=merge", "-p", `{"spec":{"topology":{"controlPlane":{"replicas":3}}}}`)
		three := eventuallyControlPlane(ns, name, 3, from)
		eventuallyAvailable(ns, name)

		By("and back to 1: two control plane machines destroyed, once each")
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=merge", "-p", `{"spec":{"topology":{"controlPlane":{"replicas":1}}}}`)
		kept := eventuallyControlPlane(ns, name, 1, from)
		removed := 0
		for _, w := range three {
			if w.infra.Name == kept[0].infra.Name {
				continue
			}
			removed++
			Eventually(func() []executor.Run { return destroysOf(ns, []worker{w}) }, 3*time.Minute).Should(
				ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "%s was destroyed", w.infra.Name)
		}
		Expect(removed).To(Equal(2))
		Expect(one).NotTo(BeEmpty())

		By("the version upgrade: the control plane machine replaced first, then the workers, each new machine applied before an old one's destroy")
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=merge", "-p", `{"spec":{"topology":{"version":"`+to+`"}}}`)
		upgradedCP := eventuallyControlPlane(ns, name, 1, to)
		newWorkers := eventuallyWorkersAt(ns, md, 2, to)
		expectRolledOut(ns, kept, upgradedCP)
		expectRolledOut(ns, oldWorkers, newWorkers)
		runs := shared.Executor().Runs()
		cpApplied := runsOf(runs, infrav1.TerraformMachineKind, ns, upgradedCP[0].infra.Name, infrav1.OperationApply)
		Expect(cpApplied).To(HaveLen(1))
		for _, w := range newWorkers {
			rs := runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply)
			Expect(rs).To(HaveLen(1), "%s applied once", w.infra.Name)
			Expect(rs[0].Started.After(cpApplied[0].Finished)).To(BeTrue(), "worker %s was applied after the control plane was upgraded", w.infra.Name)
		}
		eventuallyAvailable(ns, name)

		By("exactly once: every machine of the Cluster's life applied once and destroyed at most once")
		runs = shared.Executor().Runs()
		for _, w := range concat(one, three, kept, upgradedCP, oldWorkers, newWorkers) {
			Expect(runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply)).To(HaveLen(1), "%s applied once", w.infra.Name)
			Expect(len(runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy))).To(BeNumerically("<=", 1), "%s destroyed at most once", w.infra.Name)
		}
		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		checkInvariants()
	})
})

// eventuallyAvailable waits until the Cluster reports Available.
func eventuallyAvailable(ns, name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := &clusterv1.Cluster{}
		g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.AvailableCondition)).To(BeTrue(), "Available: %v", meta.FindStatusCondition(c.Status.Conditions, clusterv1.AvailableCondition))
	}, 5*time.Minute).Should(Succeed())
}

// eventuallyControlPlane waits until the Cluster has exactly n control plane Machines, none being
// deleted, each at version, with a node and a Ready TerraformMachine.
func eventuallyControlPlane(ns, cluster string, n int, version string) []worker {
	GinkgoHelper()
	return eventuallyMachines(ns, client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineControlPlaneLabel: ""}, n, version)
}

// eventuallyWorkersAt is eventuallyWorkers for Machines at version.
func eventuallyWorkersAt(ns, md string, n int, version string) []worker {
	GinkgoHelper()
	return eventuallyMachines(ns, client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}, n, version)
}

// eventuallyMachines waits until exactly n Machines match sel, none being deleted, each at
// version with a node reference and a Ready TerraformMachine, and returns them.
func eventuallyMachines(ns string, sel client.MatchingLabels, n int, version string) []worker {
	GinkgoHelper()
	var out []worker
	Eventually(func(g Gomega) {
		out = nil
		var ms clusterv1.MachineList
		g.Expect(shared.Client().List(ctx, &ms, client.InNamespace(ns), sel)).To(Succeed())
		g.Expect(ms.Items).To(HaveLen(n))
		for i := range ms.Items {
			m := &ms.Items[i]
			g.Expect(m.DeletionTimestamp).To(BeNil(), "%s is being deleted", m.Name)
			g.Expect(m.Spec.Version).To(Equal(version), "%s's version", m.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "%s has no node yet", m.Name)
			infra := tm(ns, m.Spec.InfrastructureRef.Name)
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
			ready := readyCondition(shared, infra)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(string(ready.Status)).To(Equal("True"), "%s: %s", infra.Name, ready.Message)
			out = append(out, worker{machine: m, infra: infra})
		}
	}, 6*time.Minute).Should(Succeed())
	return out
}
