package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// Cluster API's MachineDeployment rollout strategies over TerraformMachines (issue 44): what the
// real Cluster API core manager asks of CAPTF under each, and that CAPTF applies and destroys
// each machine exactly once, in the order the strategy sets.
var _ = Describe("MachineDeployment rollout strategies under the real Cluster API", func() {
	It("pauses a rollout, rolls out with no surge (an old machine destroyed before its replacement applies), waits on OnDelete for a deleted machine, and holds a rollout whose new machine fails to apply, destroying nothing early", func() {
		const ns, name = "rollout", "ro"
		const md = name + "-workers"
		checkInvariants := clusterWithWorkers(ns, name)
		applyFixture(shared, ns, "rollout.yaml", name, 0)
		eventuallyWorkers(ns, md, 3, name+"-workers-v1")
		kubectl(shared, "scale", "-n", ns, "machinedeployment", md, "--replicas=2")
		v1 := eventuallyWorkers(ns, md, 2, name+"-workers-v1")

		By("paused, with maxSurge 0 and maxUnavailable 1 and a new template: Cluster API observes it and nothing rolls")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p",
			`{"spec":{"paused":true,"rollout":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}},`+
				`"template":{"spec":{"infrastructureRef":{"name":"`+name+`-workers-v2"}}}}}`)
		eventuallyObserved(ns, md)
		Expect(machineSetsFor(ns, md, name+"-workers-v2")).To(BeEmpty(), "a paused MachineDeployment makes no MachineSet of the new template")
		Expect(eventuallyWorkers(ns, md, 2, name+"-workers-v1")).To(HaveLen(2))
		Expect(destroysOf(ns, v1)).To(BeEmpty(), "a paused rollout destroys nothing")

		By("resumed: each old machine is destroyed before its replacement is applied, one at a time")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p", `{"spec":{"paused":false}}`)
		v2 := eventuallyWorkers(ns, md, 2, name+"-workers-v2")
		expectRolledOutWithoutSurge(ns, v1, v2)

		By("OnDelete and a new template: nothing rolls until a Machine is deleted, then that one alone is replaced")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p",
			`{"spec":{"rollout":{"strategy":{"type":"OnDelete","rollingUpdate":null}},"template":{"spec":{"infrastructureRef":{"name":"`+name+`-workers-v1"}}}}}`)
		eventuallyObserved(ns, md)
		Expect(eventuallyWorkers(ns, md, 2, name+"-workers-v2")).To(HaveLen(2))
		Expect(destroysOf(ns, v2)).To(BeEmpty(), "OnDelete destroys nothing by itself")
		kubectl(shared, "delete", "machine", "-n", ns, v2[0].machine.Name, "--wait=false")
		Eventually(func() error {
			return shared.Client().Get(ctx, client.ObjectKeyFromObject(v2[0].infra), &infrav1.TerraformMachine{})
		}, 3*time.Minute).ShouldNot(Succeed(), "the deleted machine's TerraformMachine is gone")
		mixed := eventuallyWorkers(ns, md, 2, "")
		names := []string{mixed[0].infra.Name, mixed[1].infra.Name}
		Expect(names).To(ContainElement(v2[1].infra.Name), "the machine nobody deleted stays")
		for _, w := range mixed {
			if w.infra.Name != v2[1].infra.Name {
				Expect(w.infra.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, name+"-workers-v1"), "its replacement comes from the new template")
			}
		}
		Expect(destroysOf(ns, v2[:1])).To(HaveLen(1), "the deleted machine was destroyed once")
		Expect(destroysOf(ns, v2[1:])).To(BeEmpty())

		By("RollingUpdate to a template whose module fails: the new machine's apply fails, the rollout waits and no old machine is destroyed")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p",
			`{"spec":{"rollout":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}},"template":{"spec":{"infrastructureRef":{"name":"`+name+`-workers-v3"}}}}}`)
		var broken *infrav1.TerraformMachine
		Eventually(func(g Gomega) {
			var list infrav1.TerraformMachineList
			g.Expect(shared.Client().List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			broken = nil
			for i := range list.Items {
				if list.Items[i].Annotations[clusterv1.TemplateClonedFromNameAnnotation] == name+"-workers-v3" {
					broken = &list.Items[i]
				}
			}
			g.Expect(broken).NotTo(BeNil(), "a machine of the failing template")
			g.Expect(broken.Status.LastRun).NotTo(BeNil())
			g.Expect(broken.Status.LastRun.Outcome).To(Equal(infrav1.RunFailed))
			g.Expect(broken.Status.LastRun.Message).To(ContainSubstring("this machine module fails on purpose"))
		}, 4*time.Minute).Should(Succeed())
		Expect(destroysOf(ns, mixed)).To(BeEmpty(), "the rollout destroyed no old machine while the new one failed")
		for _, w := range mixed {
			m := &clusterv1.Machine{}
			Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(w.machine), m)).To(Succeed())
			Expect(m.DeletionTimestamp).To(BeNil(), "%s is not being deleted", m.Name)
		}

		By("a working template again: the failed machine goes, the rollout completes, each old machine destroyed once after a new one applied")
		kubectl(shared, "patch", "-n", ns, "machinedeployment", md, "--type=merge", "-p",
			`{"spec":{"template":{"spec":{"infrastructureRef":{"name":"`+name+`-workers-v4"}}}}}`)
		v4 := eventuallyWorkers(ns, md, 2, name+"-workers-v4")
		expectRolledOut(ns, mixed, v4)
		Eventually(func() error {
			return shared.Client().Get(ctx, client.ObjectKeyFromObject(broken), &infrav1.TerraformMachine{})
		}, 3*time.Minute).ShouldNot(Succeed(), "the failed machine is gone")

		By("exactly once: every machine that became a worker was applied once, and destroyed at most once")
		runs := shared.Executor().Runs()
		for _, w := range concat(v1, v2, mixed, v4) {
			applied := 0
			for _, r := range runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply) {
				if r.Phase == "Succeeded" {
					applied++
				}
			}
			Expect(applied).To(Equal(1), "%s applied once", w.infra.Name)
			Expect(len(runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy))).To(BeNumerically("<=", 1), "%s destroyed at most once", w.infra.Name)
		}
		kubectl(shared, "delete", "cluster", "-n", ns, name, "--timeout=5m")
		checkInvariants()
	})
})

// eventuallyObserved waits until Cluster API's MachineDeployment controller has observed md's
// latest spec.
func eventuallyObserved(ns, md string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &clusterv1.MachineDeployment{}
		g.Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	}, time.Minute).Should(Succeed())
}

// machineSetsFor lists the MachineSets of md whose Machines come from the infrastructure
// template named template.
func machineSetsFor(ns, md, template string) []string {
	GinkgoHelper()
	var list clusterv1.MachineSetList
	Expect(shared.Client().List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md})).To(Succeed())
	var out []string
	for _, ms := range list.Items {
		if ms.Spec.Template.Spec.InfrastructureRef.Name == template {
			out = append(out, ms.Name)
		}
	}
	return out
}

// destroysOf lists the destroy runs of the workers' TerraformMachines.
func destroysOf(ns string, ws []worker) []executor.Run {
	var out []executor.Run
	runs := shared.Executor().Runs()
	for _, w := range ws {
		out = append(out, runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationDestroy)...)
	}
	return out
}

// expectRolledOutWithoutSurge checks a rollout with maxSurge 0: each old machine was destroyed
// once, and the i-th old destroy finished before the i-th new apply started.
func expectRolledOutWithoutSurge(ns string, old, rolled []worker) {
	GinkgoHelper()
	var destroyed, applied []time.Time
	for _, w := range old {
		Eventually(func() []executor.Run { return destroysOf(ns, []worker{w}) }, 2*time.Minute).Should(
			ContainElement(HaveField("Phase", BeEquivalentTo("Succeeded"))), "the old machine %s was destroyed", w.infra.Name)
		rs := destroysOf(ns, []worker{w})
		Expect(rs).To(HaveLen(1), "the old machine %s was destroyed once", w.infra.Name)
		destroyed = append(destroyed, rs[0].Finished)
	}
	runs := shared.Executor().Runs()
	for _, w := range rolled {
		for _, r := range runsOf(runs, infrav1.TerraformMachineKind, ns, w.infra.Name, infrav1.OperationApply) {
			applied = append(applied, r.Started)
		}
	}
	sortTimes(destroyed)
	sortTimes(applied)
	Expect(applied).To(HaveLen(len(rolled)), "each new machine applied once")
	for i := range destroyed {
		Expect(destroyed[i].Before(applied[i])).To(BeTrue(),
			"old machine destroy %d ended at %s, after the %d. new machine's apply started (%s): a surge", i+1, destroyed[i], i+1, applied[i])
	}
}

func concat(lists ...[]worker) []worker {
	var out []worker
	seen := map[string]bool{}
	for _, l := range lists {
		for _, w := range l {
			if !seen[w.infra.Name] && !strings.HasSuffix(w.infra.Name, "-m0") {
				seen[w.infra.Name] = true
				out = append(out, w)
			}
		}
	}
	return out
}
