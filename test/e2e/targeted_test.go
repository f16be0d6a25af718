package e2e_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// inventoryOf reads the object's inventory Secret (docs/state.md, "The inventory").
func inventoryOf(g Gomega, sb target, ns, name string) *state.Inventory {
	var sec corev1.Secret
	g.Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.InventorySecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}, &sec)).To(Succeed())
	inv, err := state.ParseInventory(sec.Data)
	g.Expect(err).NotTo(HaveOccurred())
	return inv
}

// idsByAddress maps each resource instance the object's state tracks ("terraform_data.node",
// "terraform_data.adopted[0]") to its id.
func idsByAddress(sb target, ns, name string) map[string]any {
	GinkgoHelper()
	st := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
	Expect(st).NotTo(BeNil())
	out := map[string]any{}
	for _, r := range st.Resources {
		for i, in := range r.Instances {
			a := r.Type + "." + r.Name
			if r.Name == "adopted" {
				a += "[" + strconv.Itoa(i) + "]"
			}
			out[a] = in.Attributes["id"]
		}
	}
	return out
}

// eventuallyAnswered waits until bookkeeping removed the targeted operation and reported it in
// status.lastRun, and returns that record.
func eventuallyAnswered(sb target, o *infrav1.TerraformCluster) *infrav1.LastRun {
	GinkgoHelper()
	var last *infrav1.LastRun
	Eventually(func(g Gomega) {
		g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		g.Expect(o.Annotations).NotTo(HaveKey(infrav1.TargetOperationAnnotation))
		last = o.Status.LastRun
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Target).NotTo(BeEmpty(), "the last run carried no targeted operation yet")
	}, 3*time.Minute).Should(Succeed())
	return last
}

// Targeted operations with each binary (docs/state.md, "Targeted operations"): a replace asked
// for with the plugin gives one resource a new id and changes nothing else; under applyPolicy
// Manual an import, a replace and a forget each wait for the approval of a plan made for them,
// then apply exactly that plan; the imported resource is in the state and the next plan is
// empty; the forgotten one is gone from the state and the inventory, and nothing was destroyed;
// the module's next revision alone (docs/lifecycle.md) is planned, and applied once approved.
var _ = Describe(doccmd.SpecTargeted, func() {
	for i, b := range binaries {
		It("replaces and imports one resource with "+b.product+", at once and through an approved plan", func() {
			path, line, _ := binaryVersion(b)
			By("the Jobs run " + line)
			sb := shared
			if shared.TerraformBinary() != path {
				sb = startSandboxWith("tg-"+strings.ToLower(b.product), path)
				DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
			}
			ns, name := "targeted-"+strings.ToLower(b.product), "tg"
			createNamespace(sb, ns)
			applyFixture(sb, ns, "targets.yaml", name, 0)
			o := tc(ns, name)
			eventuallyReady(sb, o)
			before := idsByAddress(sb, ns, name)
			Expect(before).To(HaveLen(2))
			applies := countRuns(sb, ns, name, infrav1.OperationApply)
			Expect(applies).To(Equal(1))
			docs := namespacedShell(sb, ns, buildPlugin())

			By("a request the parser does not read is refused at admission")
			out, err := run(sb.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, infrav1.TargetOperationAnnotation+"=replace")
			Expect(err).To(HaveOccurred(), out)
			Expect(out).To(ContainSubstring(`want "replace <address>"`))

			By("Automatic: the plugin asks for a replace; one Apply gives terraform_data.node a new id and changes nothing else")
			backups := len(backupsOf(sb, o))
			if i == 0 {
				docs.ok("docs/state.md", "kubectl captf replace terraformcluster/demo terraform_data.node", "demo", name)
			} else {
				r := docs.run("", "docs/cli.md", "kubectl captf -n prod replace terraformcluster/prod terraform_data.node", "-n prod", "-n "+ns, "terraformcluster/prod", "terraformcluster/"+name)
				Expect(r.code).To(BeZero(), r.out)
				Expect(r.cmd.Output).To(HaveLen(1), "docs/cli.md shows one line after the command")
				// The line the page shows, for this spec's namespace and object, is what it printed.
				Expect(r.out).To(Equal(strings.ReplaceAll(r.cmd.Output[0], "TerraformCluster prod/prod", fmt.Sprintf("TerraformCluster %s/%s", ns, name)) + "\n"))
			}
			last := eventuallyAnswered(sb, o)
			Expect(last.Target).To(Equal("replace terraform_data.node"))
			Expect(last.Outcome).To(Equal(infrav1.RunSucceeded))
			Expect(last.Operation).To(Equal(infrav1.OperationApply))
			after := idsByAddress(sb, ns, name)
			Expect(after["terraform_data.node"]).NotTo(Equal(before["terraform_data.node"]), "replaced: a new id")
			Expect(after["terraform_data.network"]).To(Equal(before["terraform_data.network"]), "nothing else changed")
			Expect(after).To(HaveLen(2))
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 1))
			Eventually(func() int { return len(backupsOf(sb, o)) }).Should(BeNumerically(">", backups), "the state the replace left is backed up")
			Expect(docs.ok("docs/state.md", "kubectl get events --field-selector reason=TargetOperationDone")).To(
				ContainSubstring(`carried out captf.io/target-operation="replace terraform_data.node"`))

			By("Manual: an import made in one write with the change that declares its resource waits for approval of its plan")
			kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"applyPolicy":"Manual"}}`)
			docs.ok("docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"metadata":{"annotations":{"captf.io/target-operation":"import`, "demo", name)
			p := eventuallyWaiting(sb, o, "")
			Expect(p.Target).To(Equal("import terraform_data.adopted[0] adopted-by-hand"))
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies+1), "nothing applies before the approval")
			Expect(idsByAddress(sb, ns, name)).NotTo(HaveKey("terraform_data.adopted[0]"))
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p.ID)
			last = eventuallyAnswered(sb, o)
			Expect(last.Target).To(Equal(p.Target))
			Expect(last.Outcome).To(Equal(infrav1.RunSucceeded))
			job := applyJobOf(sb, ns, name, p.ID)
			Expect(job.Annotations[infrav1.TargetOperationAnnotation]).To(Equal(p.Target), "the approved plan's Apply carried the request")
			imported := idsByAddress(sb, ns, name)
			Expect(imported["terraform_data.adopted[0]"]).To(Equal("adopted-by-hand"), "imported with the ID asked for, not created")
			Expect(imported["terraform_data.node"]).To(Equal(after["terraform_data.node"]))
			Expect(imported["terraform_data.network"]).To(Equal(before["terraform_data.network"]))

			By("the next plan is empty: a drift check finds no drift")
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.DriftCheckAnnotation+"=after-import")
			Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, 2*time.Minute).Should(
				And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.NoDriftReason)))
			Expect(countRuns(sb, ns, name, infrav1.OperationDrift)).To(Equal(1), "the object's one drift check, asked for after the import")

			By("Manual: a replace by the annotation waits for approval of a plan that replaces one resource, then replaces it")
			docs.ok("docs/state.md", "kubectl annotate terraformcluster demo captf.io/target-operation=", "demo", name)
			p2 := eventuallyWaiting(sb, o, p.ID)
			Expect(p2.Target).To(Equal("replace terraform_data.node"))
			Expect([]int32{p2.Create, p2.Update, p2.Replace, p2.Delete}).To(Equal([]int32{0, 0, 1, 0}))
			Expect(p2.Addresses).To(Equal([]string{"terraform_data.node"}))
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p2.ID)
			last = eventuallyAnswered(sb, o)
			Expect(last.Target).To(Equal("replace terraform_data.node"))
			final := idsByAddress(sb, ns, name)
			Expect(final["terraform_data.node"]).NotTo(Equal(imported["terraform_data.node"]))
			Expect(final["terraform_data.network"]).To(Equal(before["terraform_data.network"]))
			Expect(final["terraform_data.adopted[0]"]).To(Equal("adopted-by-hand"))
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 3))

			if i == 1 {
				By("Manual: a forget while the module still declares the resource: its plan fails with terraform's reason, and nothing changes")
				r := docs.run("", "docs/cli.md", "kubectl captf -n prod forget terraformcluster/prod terraform_data.node", "-n prod", "-n "+ns, "terraformcluster/prod", "terraformcluster/"+name)
				Expect(r.code).To(BeZero(), r.out)
				Expect(r.cmd.Output).To(HaveLen(1), "docs/cli.md shows one line after the command")
				Expect(r.out).To(Equal(strings.ReplaceAll(r.cmd.Output[0], "TerraformCluster prod/prod", fmt.Sprintf("TerraformCluster %s/%s", ns, name)) + "\n"))
				Eventually(func() []string { return warningNotes(sb, ns, name, "TargetOperationFailed") }, 2*time.Minute).Should(
					ContainElement(And(ContainSubstring(`"forget terraform_data.node"`), MatchRegexp(`Removed resource (block )?still exists`))))
				Eventually(func(g Gomega) {
					g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
					g.Expect(o.Annotations).NotTo(HaveKey(infrav1.TargetOperationAnnotation), "a failed request is answered")
				}).Should(Succeed())
				Expect(idsByAddress(sb, ns, name)).To(Equal(final), "the state is untouched")
				Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies+3), "no apply")
			}

			By("Manual: a forget made in one write with the module's next revision, which no longer declares terraform_data.node, waits for approval of a plan that forgets it and destroys nothing")
			// The next revision of the module: the same ConfigMap without terraform_data.node.
			var cm corev1.ConfigMap
			Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cluster-module"}, &cm)).To(Succeed())
			nodeBlock := "resource \"terraform_data\" \"node\" {\n  input = \"node\"\n}\n"
			Expect(cm.Data["main.tf"]).To(ContainSubstring(nodeBlock))
			v2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-module-v2"},
				Data: map[string]string{"main.tf": strings.Replace(cm.Data["main.tf"], nodeBlock, "", 1)}}
			Expect(sb.Client().Create(ctx, v2)).To(Succeed())
			applied := countRuns(sb, ns, name, infrav1.OperationApply)
			docs.ok("docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"metadata":{"annotations":{"captf.io/target-operation":"forget`, "demo", name)
			p3 := eventuallyWaiting(sb, o, p2.ID)
			Expect(p3.Target).To(Equal("forget terraform_data.node"))
			Expect([]int32{p3.Create, p3.Update, p3.Replace, p3.Delete, p3.Import, p3.Forget}).To(Equal([]int32{0, 0, 0, 0, 0, 1}))
			Expect(p3.Addresses).To(Equal([]string{"terraform_data.node"}))
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applied), "nothing applies before the approval")
			Expect(captfOK(sb, ns, "plan", "show", "terraformcluster/"+name)).To(ContainSubstring("create 0, update 0, replace 0, delete 0, forget 1"))
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p3.ID)
			last = eventuallyAnswered(sb, o)
			Expect(last.Target).To(Equal("forget terraform_data.node"))
			Expect(last.Outcome).To(Equal(infrav1.RunSucceeded))
			Expect(applyJobOf(sb, ns, name, p3.ID).Annotations[infrav1.TargetOperationAnnotation]).To(Equal(p3.Target))
			forgotten := idsByAddress(sb, ns, name)
			Expect(forgotten).NotTo(HaveKey("terraform_data.node"), "gone from the state")
			Expect(forgotten["terraform_data.network"]).To(Equal(before["terraform_data.network"]))
			Expect(forgotten["terraform_data.adopted[0]"]).To(Equal("adopted-by-hand"))
			Eventually(func(g Gomega) {
				inv := inventoryOf(g, sb, ns, name)
				g.Expect(inv.Resources).NotTo(ContainElement(HaveField("Address", "terraform_data.node")), "gone from the inventory")
				g.Expect(inv.Resources).To(ContainElement(HaveField("Address", "terraform_data.network")))
			}).Should(Succeed())
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applied + 1))

			By("Manual: the module's next revision alone, a new ConfigMap and nothing asked, is planned and waits for approval, then applied")
			extraBlock := "resource \"terraform_data\" \"extra\" {\n  input = \"extra\"\n}\n"
			v3 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-module-v3"},
				Data: map[string]string{"main.tf": v2.Data["main.tf"] + extraBlock}}
			Expect(sb.Client().Create(ctx, v3)).To(Succeed())
			docs.ok("docs/lifecycle.md", `kubectl patch terraformcluster demo --type=merge -p '{"spec":{"module"`, "demo", name)
			p4 := eventuallyWaiting(sb, o, p3.ID)
			Expect(p4.Target).To(BeEmpty())
			Expect([]int32{p4.Create, p4.Update, p4.Replace, p4.Delete, p4.Import, p4.Forget}).To(Equal([]int32{1, 0, 0, 0, 0, 0}))
			Expect(p4.Addresses).To(Equal([]string{"terraform_data.extra"}))
			Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applied+1), "nothing applies before the approval")
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p4.ID)
			Eventually(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }).Should(Equal(applied + 2))
			Eventually(func(g Gomega) {
				inv := inventoryOf(g, sb, ns, name)
				g.Expect(inv.Resources).To(ContainElement(HaveField("Address", "terraform_data.extra")), "the new module's resource is applied")
			}).Should(Succeed())
			Expect(idsByAddress(sb, ns, name)["terraform_data.network"]).To(Equal(before["terraform_data.network"]))
			AddReportEntry(b.product+": targeted operations", fmt.Sprintf("node ids %v -> %v -> %v", before["terraform_data.node"], after["terraform_data.node"], final["terraform_data.node"]))
		})
	}
})
