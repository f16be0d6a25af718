package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// writeOutside writes the state file the accept.yaml module reads its subnet from: the value
// that lives outside Terraform.
func writeOutside(path, subnet string, serial int) {
	GinkgoHelper()
	doc := fmt.Sprintf(`{"version":4,"terraform_version":"1.9.0","serial":%d,"lineage":"outside-e2e","outputs":{"subnet":{"value":%q,"type":"string"}},"resources":[]}`,
		serial, subnet)
	Expect(os.WriteFile(path, []byte(doc), 0o644)).To(Succeed())
}

// recordedSubnet is the subnet the object's state records.
func recordedSubnet(sb target, ns, name string) any {
	st := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
	if st == nil {
		return nil
	}
	return st.Outputs["subnet"].Value
}

// networkID is terraform_data.network's id in the state: it changes only if the resource is
// created again.
func networkID(sb target, ns, name string) any {
	for _, r := range stateOf(sb, infrav1.TerraformClusterKind, ns, name).Resources {
		if r.Type == "terraform_data" && r.Name == "network" && len(r.Instances) == 1 {
			return r.Instances[0].Attributes["id"]
		}
	}
	return nil
}

// Refresh with real Terraform (docs/drift.md, "Accepting drift: refresh"): a value changed
// outside Terraform is found by a drift check of mode Accept, recorded by one Refresh Job, and
// the next check finds nothing, while no apply ran and no resource changed; then a refresh on
// demand with the annotation captf.io/refresh.
var _ = Describe(doccmd.SpecRefresh, func() {
	It("accepts an out-of-band change with a refresh, and refreshes on demand", func() {
		const ns, name, interval = "refresh", "rf", 15 * time.Second
		sb := shared
		createNamespace(sb, ns)
		outside := filepath.Join(GinkgoT().TempDir(), "outside.tfstate")
		writeOutside(outside, "10.0.0.0/24", 1)
		raw, err := os.ReadFile(filepath.Join("testdata", "accept.yaml"))
		Expect(err).NotTo(HaveOccurred())
		doc := strings.ReplaceAll(strings.ReplaceAll(string(raw), "CLUSTER", name), "EXTPATH", outside)
		file := filepath.Join(GinkgoT().TempDir(), "accept.yaml")
		Expect(os.WriteFile(file, []byte(doc), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-n", ns, "-f", file)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		Expect(recordedSubnet(sb, ns, name)).To(Equal("10.0.0.0/24"))
		id := networkID(sb, ns, name)
		Expect(id).NotTo(BeNil())
		runs := func(op infrav1.Operation) int {
			return len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, op))
		}
		Expect(runs(infrav1.OperationApply)).To(Equal(1))

		By("checks on a 15s interval in mode Accept find nothing at first")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"drift":{"interval":%q,"mode":"Accept"}}}`, interval.String()))
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, 2*time.Minute).Should(
			And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.NoDriftReason)))

		By("the value changes outside Terraform: a check finds it, one Refresh records it, DriftDetected turns Accepted")
		writeOutside(outside, "10.9.9.0/24", 2)
		changed := time.Now()
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, interval*11/10+2*time.Minute).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.AcceptedReason)))
		AddReportEntry("drift accepted after the outside change", since(changed))
		// docs/drift.md's command, as a person working in the namespace runs it, shows what the docs show.
		docs := namespacedShell(sb, ns)
		Expect(docs.ok("docs/drift.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="DriftDetected")].reason}'`, "demo", name)).To(Equal("Accepted"))
		Expect(recordedSubnet(sb, ns, name)).To(Equal("10.9.9.0/24"), "the state records what is there now")
		Expect(runs(infrav1.OperationRefresh)).To(Equal(1))
		refresh := runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationRefresh)[0]
		Expect(refresh.Phase).To(Equal(corev1.PodSucceeded))
		Expect(runs(infrav1.OperationApply)).To(Equal(1), "mode Accept applies nothing")
		Expect(networkID(sb, ns, name)).To(Equal(id), "no resource was created again")

		By("the next check finds no drift, and still nothing is applied")
		checks := runs(infrav1.OperationDrift)
		Eventually(func() int { return runs(infrav1.OperationDrift) }, interval*11/10+time.Minute).Should(BeNumerically(">", checks))
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }).Should(
			HaveField("Reason", infrav1.NoDriftReason))
		Expect(runs(infrav1.OperationRefresh)).To(Equal(1), "one refresh per change found")
		Expect(runs(infrav1.OperationApply)).To(Equal(1))

		By("checks off; a refresh on demand records the next outside change and answers the request")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=json", "-p", `[{"op":"remove","path":"/spec/drift/interval"}]`)
		writeOutside(outside, "10.7.7.0/24", 3)
		docs.ok("docs/drift.md", "kubectl annotate terraformcluster demo captf.io/refresh=2026-12-02", "demo", name)
		Eventually(func() int { return runs(infrav1.OperationRefresh) }, 2*time.Minute).Should(Equal(2))
		Eventually(func() map[string]string {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			return o.Annotations
		}, time.Minute).ShouldNot(HaveKey(infrav1.RefreshAnnotation))
		Expect(recordedSubnet(sb, ns, name)).To(Equal("10.7.7.0/24"))
		// The annotation goes with the bookkeeping's metadata write; the status follows in the same pass.
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftJobSucceededCondition) }).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.JobSucceededReason)))
		Expect(runs(infrav1.OperationApply)).To(Equal(1), "a refresh never applies the module")
		Expect(networkID(sb, ns, name)).To(Equal(id))
	})
})
