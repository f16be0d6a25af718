package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// The ClusterClass flavor under the real Cluster API: the core manager's topology controller,
// kubeadm's control plane and bootstrap managers, and CAPTF.
var _ = Describe("the ClusterClass flavor (templates/cluster-template-topology.yaml) under the real Cluster API", func() {
	It("as docs/cluster-api.md says: the class, then clusterctl generate cluster --flavor topology: a kubeadm control plane, a MachineDeployment of 3 and a MachinePool of 2 come up; the pool scales to 4 with one apply, the workers to 5 and to 2 (the removed ones destroyed); a variable override rolls the workers out (new applied before old go); an unhealthy worker is remediated; deleting the Cluster destroys everything, machines before the cluster", func() {
		const ns, name = "topology", "cc"
		checkInvariants := watchInvariants(shared, ns)
		createNamespace(shared, ns)
		kubectl(shared, "apply", "-n", ns, "-f", filepath.Join(repo, "config", "samples", "modules.yaml"))
		By("the ClusterClass and its templates (kubectl apply -k templates)")
		kubectl(shared, "apply", "-n", ns, "-k", filepath.Join(repo, "templates"))
		out, err := run(shared.Kubeconfig(), "clusterctl", "generate", "cluster", name, "--from", filepath.Join(repo, "templates", "cluster-template-topology.yaml"),
			"--target-namespace", ns, "--kubernetes-version", "v1.36.0", "--worker-machine-count", "3")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(out).NotTo(ContainSubstring("${"))
		generated := filepath.Join(GinkgoT().TempDir(), "cluster.yaml")
		Expect(os.WriteFile(generated, []byte(out), 0o600)).To(Succeed())
		kubectl(shared, "apply", "-f", generated)

		By("the topology controller stamps a TerraformCluster from the class's template; it applies")
		cluster := &clusterv1.Cluster{}
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
			g.Expect(cluster.Spec.InfrastructureRef.Name).NotTo(BeEmpty())
		}, time.Minute).Should(Succeed())
		infraCluster := tc(ns, cluster.Spec.InfrastructureRef.Name)
		eventuallyReady(shared, infraCluster)
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(infraCluster), infraCluster)).To(Succeed())
		Expect(infraCluster.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, "captf"))

		By("kubeadm's control plane provider makes its machine, CAPTF applies it, its node initializes the control plane")
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
		}, 3*time.Minute).Should(Succeed(), "the control plane machine's node initializes the control plane")
		var cps clusterv1.MachineList
		Expect(shared.Client().List(ctx, &cps, client.InNamespace(ns), client.HasLabels{clusterv1.MachineControlPlaneLabel})).To(Succeed())
		Expect(cps.Items).To(HaveLen(1))
		Expect(cps.Items[0].Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfig"))
		controlPlane := tm(ns, cps.Items[0].Spec.InfrastructureRef.Name)
		eventuallyReady(shared, controlPlane)

		By("the MachineDeployment of 3: each Machine's TerraformMachine cloned, applied with kubeadm's bootstrap data, its node found")
		md := topologyObject(ns, name, &clusterv1.MachineDeploymentList{}, clusterv1.ClusterTopologyMachineDeploymentNameLabel, "md-0")
		three := eventuallyWorkers(ns, md, 3, "")
		for _, w := range three {
			Expect(w.machine.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfig"))
			Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply)).
				To(ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))))
		}

		By("the MachinePool of 2: one TerraformMachinePool applied, 2 provider IDs, 2 nodes")
		mp := topologyObject(ns, name, &clusterv1.MachinePoolList{}, clusterv1.ClusterTopologyMachinePoolNameLabel, "mp-0")
		pool := eventuallyPool(ns, mp, 2)
		poolApplies := len(runsOf(shared.Executor().Runs(), infrav1.TerraformMachinePoolKind, ns, pool.Name, infrav1.OperationApply))

		By("clusterctl describe cluster --echo shows the TerraformMachinePool under its MachinePool; without --echo a Ready one is hidden as an echo, as a Ready TerraformMachine is")
		describe := func(args ...string) string {
			out, err := run(shared.Kubeconfig(), "clusterctl", append([]string{"describe", "cluster", name, "-n", ns}, args...)...)
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			return out
		}
		Expect(describe("--echo")).To(MatchRegexp(`(?m)^\s+└─MachinePool ` + ns + `/` + mp + `, .*\n(.*\n)?\s+└─TerraformMachinePool ` + ns + `/` + pool.Name + `\s+True\s+Provisioned\s`))
		Expect(describe()).NotTo(ContainSubstring("TerraformMachinePool"))

		By("kubectl captf trace walks the same chain down to the Jobs and pods, and names where to look first: the control plane Machine, which waits for its node, then for etcd")
		// Ready comes with the apply's outputs; status.lastRun with the bookkeeping that counts
		// the finished Job, which may come later: trace shows the Job lastRun names.
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(infraCluster), infraCluster)).To(Succeed())
			g.Expect(infraCluster.Status.LastRun).NotTo(BeNil())
		}).Should(Succeed())
		r := captf(shared, ns, "", "trace", name)
		Expect(r.code).To(Equal(2), "the control plane is not Available on the sandbox: %s%s", r.stdout, r.stderr)
		for _, line := range []string{
			`^! Cluster/` + name + `  Available=False `,
			`^├─ TerraformCluster/` + infraCluster.Name + `  Ready=True `,
			`^│  └─ Job/\S+  Complete=True .*; Apply, last run$`,
			`^│     └─ Pod/\S+  Succeeded$`,
			`^├─ ! KubeadmControlPlane/\S+  Available=False `,
			`^│  └─ ! Machine/\S+  Ready=(False|Unknown) `,
			`^│     └─ TerraformMachine/\S+  Ready=True `,
			`^│  └─ MachineSet/\S+  `,
			`^│     ├─ Machine/\S+  Ready=True `,
			`^└─ MachinePool/` + mp + `  `,
			`^   └─ TerraformMachinePool/` + pool.Name + `  Ready=True `,
			`^look first at Machine ` + ns + `/` + cps.Items[0].Name + `: Ready=(False|Unknown) `,
		} {
			Expect(r.stdout).To(MatchRegexp(`(?m)`+line), "trace:\n%s", r.stdout)
		}
		By("the pool scaled to 4 through the Cluster's topology: one more apply")
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=json", "-p",
			`[{"op":"replace","path":"/spec/topology/workers/machinePools/0/replicas","value":4}]`)
		pool = eventuallyPool(ns, mp, 4)
		Expect(runsOf(shared.Executor().Runs(), infrav1.TerraformMachinePoolKind, ns, pool.Name, infrav1.OperationApply)).To(HaveLen(poolApplies + 1))

		By("the workers scaled through the Cluster's topology to 5, then to 2: the three removed machines' infrastructure destroyed")
		setWorkers := func(n int) {
			GinkgoHelper()
			kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=json", "-p",
				fmt.Sprintf(`[{"op":"replace","path":"/spec/topology/workers/machineDeployments/0/replicas","value":%d}]`, n))
		}
		setWorkers(5)
		five := eventuallyWorkers(ns, md, 5, "")
		setWorkers(2)
		two := eventuallyWorkers(ns, md, 2, "")
		kept := map[string]bool{two[0].infra.Name: true, two[1].infra.Name: true}
		removed := 0
		for _, w := range five {
			if kept[w.infra.Name] {
				continue
			}
			removed++
			Eventually(func() []executor.Run {
				return runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)
			}, 2*time.Minute).Should(ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "%s was destroyed", w.infra.Name)
			Eventually(func() *tfState { return stateOf(shared, infrav1.TerraformMachineKind, ns, w.infra.Name) }).Should(BeNil())
		}
		Expect(removed).To(Equal(3))

		By("a template change the ClusterClass way: the workers' machineModule variable overridden, the topology controller stamps a new template and Cluster API rolls the workers out, each new one applied before an old one goes")
		v1 := &corev1.ConfigMap{}
		Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "sample-machine-module"}, v1)).To(Succeed())
		v2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sample-machine-module-v2", Labels: v1.Labels}, Data: v1.Data}
		Expect(shared.Client().Create(ctx, v2)).To(Succeed())
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=json", "-p",
			`[{"op":"add","path":"/spec/topology/workers/machineDeployments/0/variables","value":{"overrides":[{"name":"machineModule","value":"sample-machine-module-v2"}]}}]`)
		Eventually(func(g Gomega) {
			var ms clusterv1.MachineList
			g.Expect(shared.Client().List(ctx, &ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md})).To(Succeed())
			g.Expect(ms.Items).To(HaveLen(2))
			for i := range ms.Items {
				infra := tm(ns, ms.Items[i].Spec.InfrastructureRef.Name)
				g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
				g.Expect(infra.Spec.Module.ConfigMap).NotTo(BeNil())
				g.Expect(infra.Spec.Module.ConfigMap.Name).To(Equal("sample-machine-module-v2"), "%s runs the new module", infra.Name)
			}
		}, 4*time.Minute).Should(Succeed(), "the workers were rolled out to the overridden module")
		rolled := eventuallyWorkers(ns, md, 2, "")
		expectRolledOut(ns, two, rolled)
		Expect(controlPlane.Spec.Module.ConfigMap.Name).To(Equal("sample-machine-module"), "the override is the workers' only")

		By("remediation: the topology's health check over the workers, one worker's node reported NotReady, its Machine replaced and its infrastructure destroyed")
		kubectl(shared, "patch", "cluster", "-n", ns, name, "--type=json", "-p",
			`[{"op":"add","path":"/spec/topology/workers/machineDeployments/0/healthCheck","value":{"enabled":true,"checks":{"unhealthyNodeConditions":[{"type":"Ready","status":"False","timeoutSeconds":5}]}}}]`)
		Eventually(func(g Gomega) {
			var mhcs clusterv1.MachineHealthCheckList
			g.Expect(shared.Client().List(ctx, &mhcs, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			g.Expect(mhcs.Items).To(HaveLen(1))
		}, time.Minute).Should(Succeed(), "the topology controller makes the MachineHealthCheck")
		sick := rolled[0]
		kubectl(shared, "patch", "node", sick.machine.Status.NodeRef.Name, "--subresource=status", "--type=strategic", "-p",
			`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"set by the test"}]}}`)
		healed := expectReplaced(ns, md, sick, rolled[1:])

		By("deleting the Cluster destroys the machines and the pool, then the cluster's infrastructure")
		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		Expect(kubectl(shared, "get", "terraformclusters,terraformmachines,terraformmachinepools,machines,kubeadmcontrolplanes", "-n", ns, "-o", "name")).To(BeEmpty())
		runs := shared.Executor().Runs()
		clusterDestroy := runsOf(runs, infrav1.TerraformClusterKind, ns, infraCluster.Name, infrav1.OperationDestroy)
		Expect(clusterDestroy).To(HaveLen(1))
		last := []struct{ kind, name string }{{infrav1.TerraformMachineKind, controlPlane.Name}, {infrav1.TerraformMachinePoolKind, pool.Name}}
		for _, w := range healed {
			last = append(last, struct{ kind, name string }{infrav1.TerraformMachineKind, w.infra.Name})
		}
		for _, o := range last {
			rs := runsOf(runs, o.kind, ns, o.name, infrav1.OperationDestroy)
			Expect(rs).To(HaveLen(1), "%s %s destroyed once", o.kind, o.name)
			Expect(rs[0].Finished.Before(clusterDestroy[0].Started)).To(BeTrue(), "%s went before the cluster's infrastructure", o.name)
		}
		checkInvariants()
	})
})

// topologyObject is the name of the one object of list's kind that the topology controller made
// for the Cluster's entry topologyName (label key names the kind's topology label): a
// MachineDeployment or a MachinePool.
func topologyObject(ns, cluster string, list client.ObjectList, key, topologyName string) string {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		g.Expect(shared.Client().List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, key: topologyName})).To(Succeed())
		items, err := meta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(items).To(HaveLen(1))
		o, err := meta.Accessor(items[0])
		g.Expect(err).NotTo(HaveOccurred())
		name = o.GetName()
	}, time.Minute).Should(Succeed())
	return name
}

// eventuallyPool waits until the MachinePool mp reports n ready replicas and its
// TerraformMachinePool is Ready with n provider IDs and replicas n, and returns the latter.
func eventuallyPool(ns, mp string, n int32) *infrav1.TerraformMachinePool {
	GinkgoHelper()
	pool := &infrav1.TerraformMachinePool{}
	Eventually(func(g Gomega) {
		p := &clusterv1.MachinePool{}
		g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: mp}, p)).To(Succeed())
		g.Expect(p.Status.ReadyReplicas).To(HaveValue(Equal(n)), "ready replicas of %s", mp)
		pool = &infrav1.TerraformMachinePool{}
		pool.Namespace, pool.Name = ns, p.Spec.Template.Spec.InfrastructureRef.Name
		g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Spec.ProviderIDList).To(HaveLen(int(n)))
		g.Expect(pool.Status.Replicas).To(HaveValue(Equal(n)))
		ready := readyCondition(shared, pool)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(string(ready.Status)).To(Equal("True"), "%s: %s", pool.Name, ready.Message)
	}, 3*time.Minute).Should(Succeed())
	return pool
}
