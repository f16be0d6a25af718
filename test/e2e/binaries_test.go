package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// binary is one of the two binaries CI runs the Jobs with. The Makefile exports both variables
// as absolute paths (`make test`, `make test-e2e`).
type binary struct {
	// product is how the binary names itself on the first line of `version`.
	product string
	// env is the variable that names it.
	env string
}

var binaries = []binary{
	{product: "OpenTofu", env: "CAPTF_TEST_TOFU"},
	{product: "Terraform", env: "CAPTF_TEST_TERRAFORM"},
}

// binaryVersion resolves a binary's variable and returns its path, the first line of its
// `version` output, and the version it writes into a state ("1.10.10"). A variable that is
// unset or names no working binary of the product fails the spec: it never skips.
func binaryVersion(b binary) (path, line, stateVersion string) {
	GinkgoHelper()
	path = os.Getenv(b.env)
	Expect(path).NotTo(BeEmpty(), "%s is not set: run 'make test-e2e' (or export it as the absolute path of a %s binary)", b.env, b.product)
	Expect(filepath.IsAbs(path)).To(BeTrue(), "%s=%s is not an absolute path", b.env, path)
	out, err := exec.Command(path, "version").Output()
	Expect(err).NotTo(HaveOccurred(), "%s=%s version", b.env, path)
	line = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	Expect(line).To(HavePrefix(b.product+" v"), "%s=%s is not %s", b.env, path, b.product)
	out, err = exec.Command(path, "version", "-json").Output()
	Expect(err).NotTo(HaveOccurred(), "%s=%s version -json", b.env, path)
	var v struct {
		Version string `json:"terraform_version"`
	}
	Expect(json.Unmarshal(out, &v)).To(Succeed(), "%s version -json: %s", path, out)
	Expect(v.Version).NotTo(BeEmpty())
	return path, line, v.Version
}

// One apply and one destroy with each binary, each in a sandbox of its own whose executor runs
// that binary (sandbox.Options.TerraformBinary), so a regression of either fails CI wherever
// the other one is installed.
var _ = Describe("apply and destroy with each binary", func() {
	for _, b := range binaries {
		It("applies and destroys a cluster's module with "+b.product, func() {
			path, line, stateVersion := binaryVersion(b)
			By(fmt.Sprintf("the Jobs run %s: %s", line, path))
			fmt.Fprintf(GinkgoWriter, "binary under test: %s (%s=%s)\n", line, b.env, path)
			AddReportEntry("binary: "+b.product, fmt.Sprintf("%s (%s)", line, path))

			name := strings.ToLower(b.product)
			began := time.Now()
			sb := startSandboxWith("bin-"+name, path)
			DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
			Expect(sb.TerraformBinary()).To(Equal(path))

			const ns = "binaries"
			createNamespace(sb, ns)
			// One variable the module does not declare: the binary ignores it, CAPTF reports it.
			applyFixtureEdited(sb, ns, "cluster.yaml", name, 0, func(doc string) string {
				Expect(doc).To(ContainSubstring("  variables:\n"))
				return strings.Replace(doc, "  variables:\n", "  variables:\n    not_declared: ignored\n", 1)
			})
			eventuallyReady(sb, tc(ns, name))
			AddReportEntry(b.product+": sandbox start to Ready", since(began))

			By("the variable the module does not declare is named in lastRun.message and a Warning event; the apply still succeeded")
			o := tc(ns, name)
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			Expect(o.Status.LastRun).NotTo(BeNil())
			Expect(o.Status.LastRun.Operation).To(Equal(infrav1.OperationApply))
			Expect(o.Status.LastRun.Outcome).To(Equal(infrav1.RunSucceeded))
			Expect(o.Status.LastRun.Message).To(Equal("variables the module does not declare (ignored): not_declared"))
			Eventually(func() []string { return warningNotes(sb, ns, name, infrav1.UndeclaredVariablesReason) }).
				Should(ConsistOf(And(ContainSubstring("not_declared"), ContainSubstring("spec.variablesFrom"))))

			By("the state was written by " + line)
			st := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
			Expect(st).NotTo(BeNil())
			Expect(st.TerraformVersion).To(Equal(stateVersion), "the state's terraform_version names the binary that wrote it")
			Expect(st.Resources).NotTo(BeEmpty())
			applies := runsOf(sb.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
			Expect(applies).To(HaveLen(1))
			Expect(applies[0].Phase).To(Equal(corev1.PodSucceeded))

			By("deleting the Cluster destroys through a destroy Job and leaves no state")
			destroyed := time.Now()
			Expect(sb.Client().Delete(ctx, &clusterv1.Cluster{ObjectMeta: tc(ns, name).ObjectMeta})).To(Succeed())
			Eventually(func(g Gomega) {
				l := &infrav1.TerraformClusterList{}
				g.Expect(sb.Client().List(ctx, l, client.InNamespace(ns))).To(Succeed())
				g.Expect(meta.LenList(l)).To(BeZero())
			}).Should(Succeed())
			AddReportEntry(b.product+": delete to gone", since(destroyed))
			destroys := runsOf(sb.Executor().Runs(), infrav1.TerraformClusterKind, ns, name, infrav1.OperationDestroy)
			Expect(destroys).To(HaveLen(1), "one destroy Job")
			Expect(destroys[0].Phase).To(Equal(corev1.PodSucceeded))
			Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, name)).To(BeNil(), "the state Secret is gone after the destroy")
			// Straight to stdout, so the CI log shows it without -ginkgo.v; hack/test-summary.sh
			// repeats every "binary check:" line.
			fmt.Printf("binary check: e2e apply and destroy passed with %s (%s)\n", line, path)
		})
	}
})
