package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// What the real Cluster API core manager does with CAPTF's objects (the sandbox runs it).
var _ = Describe("a MachineDeployment of TerraformMachines under the real Cluster API", func() {
	It("comes up from its template, scales to 5 and to 2 (the removed machines destroyed), rolls out a new template (new machines applied before old ones go), and goes with its Cluster", func() {
		const ns, name = "workers", "wk"
		const md = name + "-workers"
		checkInvariants := clusterWithWorkers(ns, name)

		By("3 Machines, each with a TerraformMachine cloned from the template, applied, its node found")
		first := eventuallyWorkers(ns, md, 3, "")
		for _, w := range first {
			Expect(w.infra.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, name+"-workers-v1"))
		}

		By("kubectl scale to 5: two more machines applied")
		kubectl(shared, "scale", "-n", ns, "machinedeployment", md, "--replicas=5")
		five := eventuallyWorkers(ns, md, 5, "")

		By("kubectl scale to 2: the three removed machines' infrastructure destroyed, their state gone")
		kubectl(shared, "scale", "-n", ns, "machinedeployment", md, "--replicas=2")
		two := eventuallyWorkers(ns, md, 2, "")
		kept := map[string]bool{}
		for _, w := range two {
			kept[w.infra.Name] = true
		}
		Expect(kept).To(HaveLen(2))
		removed := 0
		for _, w := range five {
			if kept[w.infra.Name] {
				continue
			}
			removed++
			Eventually(func() []executor.Run {
				return runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)
			}, 2*time.Minute).Should(ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "%s was destroyed", w.infra.Name)
			Eventually(func() *tfState { return stateOf(shared, infrav1.TerraformMachineKind, ns, w.infra.Name) }).Should(BeNil(), "%s's state went with it", w.infra.Name)
		}
		Expect(removed).To(Equal(3))

		By("a new template: Cluster API rolls the machines out, each new one applied before an old one goes")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p",
			`{"spec":{"template":{"spec":{"infrastructureRef":{"name":"`+name+`-workers-v2"}}}}}`)
		rolled := eventuallyWorkers(ns, md, 2, name+"-workers-v2")
		expectRolledOut(ns, two, rolled)

		By("deleting the Cluster destroys everything: the workers, the control plane machine, then the cluster")
		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		Expect(kubectl(shared, "get", "terraformclusters,terraformmachines,machines,machinedeployments", "-n", ns, "-o", "name")).To(BeEmpty())
		runs := shared.Executor().Runs()
		clusterDestroy := runsOf(runs, infrav1.TerraformClusterKind, ns, name, infrav1.OperationDestroy)
		Expect(clusterDestroy).To(HaveLen(1))
		for _, w := range append(rolled, worker{infra: tm(ns, name+"-m0")}) {
			rs := runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)
			Expect(rs).To(HaveLen(1), "%s destroyed once", w.infra.Name)
			Expect(rs[0].Finished.Before(clusterDestroy[0].Started)).To(BeTrue(), "%s went before the cluster's infrastructure", w.infra.Name)
		}
		Expect(overlapping(runsOf(runs, infrav1.TerraformClusterKind, ns, name, ""))).To(BeEmpty())
		checkInvariants()
	})
})

var _ = Describe("a MachineHealthCheck over TerraformMachines under the real Cluster API", func() {
	It("a worker whose node turns NotReady is remediated: its Machine deleted, its infrastructure destroyed, a new one applied in its place", func() {
		const ns, name = "health", "hc"
		const md = name + "-workers"
		checkInvariants := clusterWithWorkers(ns, name)
		before := eventuallyWorkers(ns, md, 3, "")
		applyFixture(shared, ns, "healthcheck.yaml", name, 0)

		By("the node of one worker reports Ready=False, as a kubelet would (kubectl patch of the node's status)")
		sick := before[0]
		kubectl(shared, "patch", "node", sick.machine.Status.NodeRef.Name, "--subresource=status", "--type=strategic", "-p",
			`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"set by the test"}]}}`)

		By("Cluster API remediates it: the Machine goes, CAPTF destroys its infrastructure, the MachineSet makes a new worker")
		expectReplaced(ns, md, sick, before[1:])

		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		checkInvariants()
	})
})

var _ = Describe("CAPTF's own health signal under the real Cluster API", func() {
	It("a worker whose module reports unhealthy for 2 drift checks turns Ready False, and a MachineHealthCheck on InfrastructureReady replaces it: its Machine deleted, its infrastructure destroyed, a new one applied", func() {
		const ns, name = "modhealth", "mh"
		const md = name + "-workers"
		checkInvariants := watchInvariants(shared, ns)
		createNamespace(shared, ns)
		applyFixture(shared, ns, "cluster.yaml", name, 0)
		applyFixture(shared, ns, "machine.yaml", name, 0)
		eventuallyReady(shared, tc(ns, name), tm(ns, name+"-m0"))
		sickDir := GinkgoT().TempDir()
		raw, err := os.ReadFile(filepath.Join("testdata", "healthworkers.yaml"))
		Expect(err).NotTo(HaveOccurred())
		doc := strings.ReplaceAll(strings.ReplaceAll(string(raw), "CLUSTER", name), "SICKDIR", sickDir)
		fixture := filepath.Join(GinkgoT().TempDir(), "healthworkers.yaml")
		Expect(os.WriteFile(fixture, []byte(doc), 0o600)).To(Succeed())
		kubectl(shared, "apply", "-n", ns, "-f", fixture)

		By("3 workers, applied, each sampled healthy")
		before := eventuallyWorkers(ns, md, 3, "")
		for _, w := range before {
			Eventually(func() *metav1.Condition {
				return meta.FindStatusCondition(terraformStatusOf(ns, w.infra.Name).Conditions, infrav1.InfrastructureHealthyCondition)
			}).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.HealthyReason)), "%s", w.infra.Name)
		}

		By("the test marks one worker sick: its module's health output turns false at the next drift checks")
		sick := before[0]
		Expect(os.WriteFile(filepath.Join(sickDir, sick.infra.Name), nil, 0o600)).To(Succeed())
		Eventually(func(g Gomega) {
			m := tm(ns, sick.infra.Name)
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
			g.Expect(meta.FindStatusCondition(m.Status.Conditions, infrav1.InfrastructureHealthyCondition)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.UnhealthyReason),
				HaveField("Message", ContainSubstring("the test marked "+sick.infra.Name+" sick"))))
			g.Expect(meta.FindStatusCondition(m.Status.Conditions, infrav1.ReadyCondition)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.InfrastructureUnhealthyReason)))
			g.Expect(m.Status.IsProvisioned()).To(BeTrue(), "provisioned is never taken back")
			g.Expect(m.Status.Health).NotTo(BeNil())
			g.Expect(m.Status.Health.ConsecutiveUnhealthy).To(BeNumerically(">=", 2))
		}, time.Minute).Should(Succeed())

		By("Cluster API mirrors it into the Machine's InfrastructureReady, the MachineHealthCheck deletes the Machine, CAPTF destroys its infrastructure")
		By("the MachineSet makes a new worker, which CAPTF applies; the healthy workers stay")
		expectReplaced(ns, md, sick, before[1:])
		destroyed := map[string]bool{}
		for _, r := range shared.Executor().Runs() {
			if r.Namespace == ns && r.OwnerKind == infrav1.TerraformMachineKind && r.Operation == string(infrav1.OperationDestroy) {
				destroyed[r.OwnerName] = true
			}
		}
		Expect(destroyed).To(Equal(map[string]bool{sick.infra.Name: true}),
			"only the sick worker was destroyed: no new worker was remediated while it was first applied")

		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		checkInvariants()
	})
})

// terraformStatusOf reads the TerraformMachine ns/name's status (empty when it is gone).
func terraformStatusOf(ns, name string) *infrav1.TerraformStatus {
	m := tm(ns, name)
	if err := shared.Client().Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return &infrav1.TerraformStatus{}
	}
	return &m.Status.TerraformStatus
}

var _ = Describe(doccmd.SpecFlavor, func() {
	It("clusterctl generate cluster, then kubectl apply, as docs/flavors.md says: the cluster, its control plane machine and 2 workers come up Ready, and go with the Cluster", func() {
		const ns, name, page = "flavor", "fl", "docs/flavors.md"
		checkInvariants := watchInvariants(shared, ns)
		docs := newDocShell(userFolder(shared.Kubeconfig()))
		docs.ok(page, "export KUBECONFIG=")
		docs.ok(page, "kubectl create namespace flavor")
		Expect(docs.ok(page, "kubectl apply -n flavor -f config/samples/modules.yaml")).To(Equal(strings.Join(pageCommand(page, "kubectl apply -n flavor").Output, "\n") + "\n"))
		docs.ok(page, "clusterctl generate cluster fl ")
		generated, err := os.ReadFile(filepath.Join(docs.dir, "fl.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(generated)).NotTo(ContainSubstring("${"))
		applied := docs.run("", page, "kubectl apply -f fl.yaml")
		Expect(applied.code).To(BeZero(), applied.out)
		expectPageOutput(applied)

		eventuallyReady(shared, tc(ns, name), tm(ns, name+"-control-plane-0"))
		eventuallyWorkers(ns, name+"-md-0", 2, name+"-md-0")
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
		}, 2*time.Minute).Should(Succeed(), "the control plane machine's node initializes the control plane")

		By("Cluster API's Available: every gate holds but ControlPlaneAvailable, which it reports only for a control plane provider (docs/flavors.md)")
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
			for _, t := range []string{clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterInfrastructureReadyCondition,
				clusterv1.ClusterWorkersAvailableCondition} {
				g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, t)).To(BeTrue(), "%s", t)
			}
			cp := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterControlPlaneAvailableCondition)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(cp.Reason).To(Equal(clusterv1.ClusterControlPlaneInternalErrorReason))
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterAvailableCondition)).To(BeFalse())
		}, 2*time.Minute).Should(Succeed())

		machines := docs.ok(page, "kubectl get machines -n flavor")
		Expect(regexp.MustCompile(`(?m)^`+name+`-\S+\s+`+name+`\s.*\sRunning\s`).FindAllString(machines, -1)).To(HaveLen(3),
			"the page says: three Running once their modules applied")

		deleted := docs.run("", page, "kubectl delete cluster -n flavor fl")
		Expect(deleted.code).To(BeZero(), deleted.out)
		expectPageOutput(deleted)
		Expect(kubectl(shared, "get", "terraformclusters,terraformmachines,machines", "-n", ns, "-o", "name")).To(BeEmpty())
		destroyed := 0
		for _, r := range shared.Executor().Runs() {
			if r.Namespace == ns && r.OwnerKind == infrav1.TerraformMachineKind && r.Operation == string(infrav1.OperationDestroy) && r.Phase == "Succeeded" {
				destroyed++
			}
		}
		Expect(destroyed).To(Equal(3), "the control plane machine and the 2 workers were destroyed")
		checkInvariants()
	})
})

// clusterWithWorkers creates namespace ns, watched by the chaos monitor, with the Cluster of
// cluster.yaml, its control plane machine (machine.yaml) once Ready, and the MachineDeployment
// of workers.yaml; it returns the monitor's check.
func clusterWithWorkers(ns, name string) func() {
	GinkgoHelper()
	checkInvariants := watchInvariants(shared, ns)
	createNamespace(shared, ns)
	applyFixture(shared, ns, "cluster.yaml", name, 0)
	applyFixture(shared, ns, "machine.yaml", name, 0)
	eventuallyReady(shared, tc(ns, name), tm(ns, name+"-m0"))
	By("the cluster's outputs reached its machine: the module received captf.cluster_outputs.network_id as the cluster's state has it")
	network := stateOf(shared, infrav1.TerraformClusterKind, ns, name).Outputs["network_id"].Value
	Expect(network).To(And(BeAssignableToTypeOf(""), Not(BeEmpty())), "the cluster's network_id output")
	Expect(stateOf(shared, infrav1.TerraformMachineKind, ns, name+"-m0").Outputs["cluster_network_id"].Value).To(Equal(network))
	applyFixture(shared, ns, "workers.yaml", name, 0)
	return checkInvariants
}

// worker is a Machine of a MachineDeployment and its TerraformMachine.
type worker struct {
	machine *clusterv1.Machine
	infra   *infrav1.TerraformMachine
}

// eventuallyWorkers waits until the MachineDeployment md has exactly n Machines, none being
// deleted, each with a node reference and a Ready TerraformMachine (cloned from template when
// it is set), and returns them.
func eventuallyWorkers(ns, md string, n int, template string) []worker {
	GinkgoHelper()
	var out []worker
	Eventually(func(g Gomega) {
		out = nil
		var ms clusterv1.MachineList
		g.Expect(shared.Client().List(ctx, &ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md})).To(Succeed())
		g.Expect(ms.Items).To(HaveLen(n), "machines of %s", md)
		for i := range ms.Items {
			m := &ms.Items[i]
			g.Expect(m.DeletionTimestamp).To(BeNil(), "%s is being deleted", m.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "%s has no node yet", m.Name)
			infra := tm(ns, m.Spec.InfrastructureRef.Name)
			g.Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
			if template != "" {
				g.Expect(infra.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, template))
			}
			ready := readyCondition(shared, infra)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", infra.Name, ready.Message)
			out = append(out, worker{machine: m, infra: infra})
		}
	}, 4*time.Minute).Should(Succeed())
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].infra.Name, out[j].infra.Name) < 0 })
	return out
}

// expectReplaced waits until sick's infrastructure was destroyed and its state is gone, and the
// MachineDeployment md is back to as many workers as before, sick not among them, every one of
// kept still there; it returns the workers.
func expectReplaced(ns, md string, sick worker, kept []worker) []worker {
	GinkgoHelper()
	Eventually(func() []executor.Run {
		return runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, sick.infra.Name, infrav1.OperationDestroy)
	}, 3*time.Minute).Should(ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "the sick worker's infrastructure was destroyed")
	Eventually(func() *tfState { return stateOf(shared, infrav1.TerraformMachineKind, ns, sick.infra.Name) }).Should(BeNil())
	after := eventuallyWorkers(ns, md, len(kept)+1, "")
	names := map[string]bool{}
	for _, w := range after {
		names[w.infra.Name] = true
	}
	Expect(names).NotTo(HaveKey(sick.infra.Name))
	for _, w := range kept {
		Expect(names).To(HaveKey(w.infra.Name), "the healthy workers stay")
	}
	return after
}

// expectRolledOut checks a rollout by Cluster API's default strategy (one more first, none
// unavailable): every old machine was destroyed once, and the i-th old machine's destroy began
// after the i-th new machine's apply ended.
func expectRolledOut(ns string, old, rolled []worker) {
	GinkgoHelper()
	runs := shared.Executor().Runs()
	var newApplied, oldDestroyed []time.Time
	for _, w := range rolled {
		for _, r := range runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply) {
			newApplied = append(newApplied, r.Finished)
		}
	}
	for _, w := range old {
		Eventually(func() []executor.Run {
			return runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)
		}, 2*time.Minute).Should(ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "the old machine %s was destroyed", w.infra.Name)
		rs := runsOf(shared.Executor().Runs(), infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)
		Expect(rs).To(HaveLen(1), "the old machine %s was destroyed once", w.infra.Name)
		oldDestroyed = append(oldDestroyed, rs[0].Started)
	}
	sortTimes(newApplied)
	sortTimes(oldDestroyed)
	Expect(newApplied).To(HaveLen(len(rolled)))
	for i := range oldDestroyed {
		Expect(oldDestroyed[i].After(newApplied[i])).To(BeTrue(),
			"old machine destroy %d started at %s, before the %d. new machine's apply ended (%s)", i+1, oldDestroyed[i], i+1, newApplied[i])
	}
}

// sortTimes sorts ts in place, earliest first.
func sortTimes(ts []time.Time) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
}
