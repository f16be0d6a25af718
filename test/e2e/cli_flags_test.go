package e2e_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// The plugin as kubectl users reach for it (docs/cli.md): status -A, -o wide and --watch, version,
// and completion through kubectl's plugin convention, each as the docs show it, against the
// sandbox with real Terraform.
var _ = Describe(doccmd.SpecCLIFlags, func() {
	It("lists every namespace, prints a wide table, watches a change through to its end, reports versions and completes through kubectl", func() {
		const ns, name = "cli-flags", "cf"
		sb := shared
		createNamespace(sb, ns)
		planFixture(sb, ns, name)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		env := append(os.Environ(), "KUBECONFIG="+sb.Kubeconfig(), "PATH="+buildPlugin()+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		// sh runs a docs command line as a shell would, with the plugin and kubectl on PATH.
		sh := func(line string) (string, int) {
			GinkgoHelper()
			cmd := exec.Command("sh", "-c", line)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				Expect(err).NotTo(HaveOccurred(), "%s", line)
			}
			GinkgoWriter.Printf("$ %s  (exit %d)\n%s", line, code, out)
			return string(out), code
		}

		By("the Installing block, run in the checkout as the page says: make build puts the plugin and its completion script in bin/; help and the plugin's version reach no cluster")
		const page = "docs/cli.md"
		docs := newDocShell(repo, "KUBECONFIG="+sb.Kubeconfig())
		docs.ok(page, "make build")
		docs.ok(page, "export PATH=$PWD/bin:$PATH")
		out := docs.ok(page, "kubectl captf --help")
		Expect(out).To(And(ContainSubstring("status"), ContainSubstring("version")))
		Expect(out).NotTo(MatchRegexp(`(?m)^\s+completion\s`), "cobra's own completion scripts are not offered")
		out = docs.ok(page, "kubectl captf version --client")
		Expect(out).To(MatchRegexp(`^kubectl-captf: \S+ \(.*go1\.\d+.*, linux/\w+\)\n$`))

		By("version: the sandbox's Kubernetes and the CAPTF API it serves, as text and JSON")
		version := docs.run("", page, "kubectl captf version")
		Expect(version.code).To(BeZero(), version.out)
		expectPageLabels(version)
		out = version.out
		Expect(out).To(MatchRegexp(`(?m)^Kubernetes:    v1\.\d+\.\d+`))
		Expect(out).To(ContainSubstring("CAPTF API:     infrastructure.cluster.x-k8s.io/v1alpha1\n"))
		var v struct {
			Plugin struct{ Version, GoVersion string }
			Server struct {
				Kubernetes       string
				CAPTFAPIVersions []string
			}
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "version", "-o", "json")), &v)).To(Succeed())
		Expect(v.Server.CAPTFAPIVersions).To(Equal([]string{"infrastructure.cluster.x-k8s.io/v1alpha1"}))
		Expect(v.Plugin.Version).NotTo(BeEmpty())

		By("status -o wide: a row per object, exit 0; -A adds the NAMESPACE column and every namespace's objects")
		out = captfOK(sb, ns, "status", "-o", "wide")
		rows := strings.Split(strings.TrimRight(out, "\n"), "\n")
		Expect(rows).To(HaveLen(2), out)
		Expect(strings.Fields(rows[0])).To(Equal([]string{"KIND", "NAME", "CLUSTER", "READY", "REASON", "SINCE", "JOB", "LAST", "RUN", "PLAN", "DRIFT", "RESOURCES"}))
		Expect(strings.Fields(rows[1])[:4]).To(Equal([]string{"TerraformCluster", name, name, "True"}))
		Expect(rows[1]).To(MatchRegexp(`Apply Succeeded \S+\s+-\s+\S+\s+\d+$`), "last run, no plan, the drift status, the resources")
		// The exit code is every namespace's: another spec's object may be NotReady.
		out = docs.run("", page, "kubectl captf status -A -o wide").stdout
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal(strings.Fields(pageCommand(page, "kubectl captf status -A -o wide").Output[0])),
			"the columns the page shows")
		Expect(out).To(HavePrefix("NAMESPACE  "))
		Expect(out).To(MatchRegexp(`(?m)^` + ns + `\s+TerraformCluster\s+` + name + `\s+` + name + `\s+True\s`))
		out, _ = sh("kubectl captf status -A")
		Expect(out).To(ContainSubstring("Cluster " + ns + "/" + name + "\n"))
		r := captf(sb, ns, "", "status", "-A", "--cluster", name)
		Expect(r.code).To(Equal(1))
		Expect(r.stderr).To(ContainSubstring("-A shows every namespace"))

		By("status -w: the report, again when a change starts an apply and when it ends; SIGTERM ends it with the last report's code")
		watch := exec.Command(filepath.Join(buildPlugin(), "kubectl-captf"), "--kubeconfig", sb.Kubeconfig(), "-n", ns, "status", "--cluster", name, "-w")
		stdout, err := watch.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(watch.Start()).To(Succeed())
		DeferCleanup(func() { _ = watch.Process.Kill() })
		var seen strings.Builder
		var mu sync.Mutex
		printed := func() string { mu.Lock(); defer mu.Unlock(); return seen.String() }
		go func() {
			lines := bufio.NewScanner(stdout)
			for lines.Scan() {
				mu.Lock()
				seen.WriteString(lines.Text() + "\n")
				mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, stdout)
		}()
		Eventually(printed).Should(ContainSubstring("state:     lineage "), "the first report")
		before := jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		setVariables(sb, ns, name, `{"generation":2}`)
		job := eventuallyNew(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply, before)
		eventuallyFinished(sb, job)
		eventuallyReady(sb, o)
		// The report that shows the second apply ended: Ready, its last run, no running Job.
		Eventually(func() string {
			reports := strings.Split(printed(), "\n# ")
			return reports[len(reports)-1]
		}).Should(And(ContainSubstring("last run:  Apply "+job.Name+" Succeeded"), ContainSubstring("TerraformCluster/"+name+"  Ready"),
			ContainSubstring("state:     lineage "), Not(ContainSubstring("job:  "))))
		Expect(watch.Process.Signal(syscall.SIGTERM)).To(Succeed())
		err = watch.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			Expect(exit.ExitCode()).To(Equal(0), "the last report printed was Ready:\n%s", printed())
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		text := printed()
		GinkgoWriter.Printf("status -w printed:\n%s", text)
		Expect(strings.Count(text, "\n# ")).To(BeNumerically(">=", 1), "each report after the first begins with its time")
		Expect(text).To(MatchRegexp(`\n# \d{4}-\d\d-\d\dT`))
		// A report is printed again only for a change of what it shows: the controller's status
		// writes may print more than one, but never one that differs from the one before only
		// in its ages.
		ages := regexp.MustCompile(`\d+[smhd] ago`)
		var bodies []string
		for i, r := range strings.Split(text, "\n# ") {
			if i > 0 {
				_, r, _ = strings.Cut(r, "\n") // the time line
			}
			bodies = append(bodies, ages.ReplaceAllString(r, ""))
		}
		for i := 1; i < len(bodies); i++ {
			Expect(bodies[i]).NotTo(Equal(bodies[i-1]), "report %d repeats report %d but for its ages", i+1, i)
		}

		By("completion: kubectl runs kubectl_complete-captf from PATH, as the docs show it")
		// Completion reads the current context's namespace; bin/ (make build's) is on its PATH.
		completed := namespacedShell(sb, ns).run("", page, "kubectl __complete captf status tfc/")
		Expect(completed.code).To(BeZero(), completed.out)
		Expect(strings.Split(strings.TrimSpace(completed.stdout), "\n")).To(Equal([]string{"tfc/" + name, ":4"}))
		out, _ = sh("kubectl __complete captf st")
		Expect(out).To(MatchRegexp(`(?m)^status\t`), "the verb, with its description")
	})
})
