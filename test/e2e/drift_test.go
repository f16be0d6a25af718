package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// tamperState changes what the state records for terraform_data.network's input, as if the
// real resource had been changed behind Terraform's back: the next plan shows one update.
func tamperState(sb target, ns, name, input string) {
	GinkgoHelper()
	key := types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}
	s := &corev1.Secret{}
	Expect(sb.Client().Get(ctx, key, s)).To(Succeed())
	zr, err := gzip.NewReader(bytes.NewReader(s.Data["tfstate"]))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	var st map[string]any
	Expect(json.Unmarshal(raw, &st)).To(Succeed())
	found := false
	for _, r := range st["resources"].([]any) {
		res := r.(map[string]any)
		if res["type"] != "terraform_data" || res["name"] != "network" {
			continue
		}
		attrs := res["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
		attrs["input"] = map[string]any{"value": input, "type": "string"}
		attrs["output"] = map[string]any{"value": input, "type": "string"}
		found = true
	}
	Expect(found).To(BeTrue(), "the state tracks terraform_data.network")
	st["serial"] = st["serial"].(float64) + 1
	out, err := json.Marshal(st)
	Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err = zw.Write(out)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	s.Data["tfstate"] = buf.Bytes()
	Expect(sb.Client().Update(ctx, s)).To(Succeed())
}

// networkInput reads what the state records for terraform_data.network's input.
func networkInput(sb target, ns, name string) any {
	for _, r := range stateOf(sb, infrav1.TerraformClusterKind, ns, name).Resources {
		if r.Type == "terraform_data" && r.Name == "network" && len(r.Instances) == 1 {
			if dyn, ok := r.Instances[0].Attributes["input"].(map[string]any); ok {
				return dyn["value"]
			}
			return r.Instances[0].Attributes["input"]
		}
	}
	return nil
}

// driftStartMargin is how much later than its due time a drift check's process may start in
// the sandbox: the bookkeeping of the previous check, the requeue, the Job create and the
// executor's start of the process.
const driftStartMargin = 5 * time.Second

// driftGaps returns, for each two consecutive drift checks of the TerraformCluster with no
// other run of it in between, the time from the end of the first to the start of the second.
func driftGaps(history []executor.Run, ns, name string) []time.Duration {
	runs := runsOf(history, infrav1.TerraformClusterKind, ns, name, "")
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	var gaps []time.Duration
	for i := 1; i < len(runs); i++ {
		prev, next := runs[i-1], runs[i]
		if prev.Operation == string(infrav1.OperationDrift) && next.Operation == string(infrav1.OperationDrift) {
			gaps = append(gaps, next.Started.Sub(prev.Finished).Round(100*time.Millisecond))
		}
	}
	return gaps
}

// The drift checks of docs/drift.md, with real Terraform: a schedule, Report, Remediate.
var _ = Describe(doccmd.SpecDriftChecks, func() {
	It("finds drift on schedule, reports it without applying, and remediates it with exactly one apply", func() {
		const ns, name, interval = "drift", "dr", 15 * time.Second
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		want := networkInput(sb, ns, name)
		Expect(want).To(Equal(ns + "/" + name))
		applies := func() []executor.Run {
			return runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		}
		Expect(applies()).To(HaveLen(1))

		By("a check on a 15s interval finds no drift")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"drift":{"interval":%q,"mode":"Report"}}}`, interval.String()))
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, 2*time.Minute).Should(
			And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.NoDriftReason)))
		Expect(o.Status.LastDriftCheck).NotTo(BeNil())

		By("the state no longer matches the module: the next check, due within the interval and its jitter, reports one update")
		tamperState(sb, ns, name, "changed-by-hand")
		tampered := time.Now()
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, interval*11/10+time.Minute).Should(
			And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.DriftFoundReason),
				HaveField("Message", ContainSubstring("0 to create, 1 to update, 0 to replace, 0 to delete")),
				HaveField("Message", ContainSubstring("mode Report"))))
		AddReportEntry("drift reported after the state changed", since(tampered))
		// docs/drift.md's command, as a person working in the namespace runs it, shows what the docs show.
		shown := namespacedShell(sb, ns).ok("docs/drift.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="DriftDetected")]}'`, "demo", name)
		Expect(shown).To(And(ContainSubstring(`"type":"DriftDetected"`), ContainSubstring(`"status":"True"`), ContainSubstring(`"reason":"DriftFound"`),
			ContainSubstring(`"message":"the infrastructure differs from the last apply: `)))
		fmt.Fprintf(GinkgoWriter, "DriftDetected: %s\n", conditionOf(sb, o, infrav1.DriftDetectedCondition).Message)

		By("Report applies nothing, through a further check")
		checks := len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDrift))
		Eventually(func() int {
			return len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDrift))
		}, interval*11/10+time.Minute).Should(BeNumerically(">", checks))
		Expect(applies()).To(HaveLen(1), "mode Report never applies")
		Expect(networkInput(sb, ns, name)).To(Equal("changed-by-hand"))

		By("Remediate: the next check finds the drift, exactly one apply follows, and DriftDetected turns False")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"drift":{"mode":"Remediate"}}}`)
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }, interval*11/10+2*time.Minute).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.RemediatedReason)))
		Expect(networkInput(sb, ns, name)).To(Equal(want), "the apply brought the infrastructure back to the module")
		Expect(applies()).To(HaveLen(2))
		Expect(applies()[1].Phase).To(Equal(corev1.PodSucceeded))
		eventuallyReady(sb, o)

		By("with nothing drifted any more, later checks apply nothing")
		checks = len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDrift))
		Eventually(func() int {
			return len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDrift))
		}, interval*11/10+time.Minute).Should(BeNumerically(">", checks))
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.DriftDetectedCondition) }).Should(
			HaveField("Reason", infrav1.NoDriftReason))
		Expect(applies()).To(HaveLen(2), "one apply per drift found")

		By("every check that directly follows another started one interval and its jitter after it ended")
		gaps := driftGaps(readHistory(sb.HistoryFile()), ns, name)
		Expect(len(gaps)).To(BeNumerically(">=", 2), "consecutive checks with nothing between them")
		for _, g := range gaps {
			// The last check is recorded (to the second) when its result is bookkept, just
			// after its Job ended; the next is due interval plus up to 10% later. The margin
			// above covers the bookkeeping, the requeue and the executor starting the process.
			Expect(g).To(BeNumerically(">=", interval-time.Second), "a check started before its interval had passed")
			Expect(g).To(BeNumerically("<=", interval*11/10+driftStartMargin), "a check started later than its interval and jitter allow")
		}
		AddReportEntry("drift check gaps (end of one to start of the next)", fmt.Sprint(gaps))

		By("the drift checks off again, so the shared sandbox runs nothing more for this object")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=json", "-p", `[{"op":"remove","path":"/spec/drift/interval"}]`)
	})
})
