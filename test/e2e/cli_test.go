package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// pluginDir holds kubectl-captf built from this checkout, and its completion script; built
// once, by the first spec that runs it, so a run that does not focus on the plugin pays nothing.
var pluginDir string

func buildPlugin() string {
	GinkgoHelper()
	if pluginDir != "" {
		return pluginDir
	}
	began := time.Now()
	dir, err := os.MkdirTemp("", "captf-plugin-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { pluginDir = ""; _ = os.RemoveAll(dir) })
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/kubectl-captf")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build kubectl-captf: %s", out)
	// Its completion script beside it, as make build and the release archive put it.
	script, err := os.ReadFile(filepath.Join(repo, "hack", "krew", "kubectl_complete-captf"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "kubectl_complete-captf"), script, 0o755)).To(Succeed())
	AddReportEntry("kubectl-captf build", time.Since(began).Round(time.Millisecond).String())
	pluginDir = dir
	return dir
}

// pluginRun is one run of the plugin binary.
type pluginRun struct {
	stdout, stderr string
	code           int
}

// captf runs kubectl-captf against a sandbox with stdin, in namespace ns, and returns its
// output and exit code (it does not fail the spec on a non-zero code: the specs check it).
func captf(sb target, ns, stdin string, args ...string) pluginRun {
	GinkgoHelper()
	full := append([]string{"--kubeconfig", sb.Kubeconfig(), "-n", ns}, args...)
	cmd := exec.Command(filepath.Join(buildPlugin(), "kubectl-captf"), full...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := pluginRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		Expect(err).NotTo(HaveOccurred(), "run kubectl-captf %s", strings.Join(args, " "))
	}
	fmt.Fprintf(GinkgoWriter, "$ kubectl captf -n %s %s  (exit %d)\n%s%s", ns, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// captfOK runs the plugin and expects exit code 0.
func captfOK(sb target, ns string, args ...string) string {
	GinkgoHelper()
	r := captf(sb, ns, "", args...)
	Expect(r.code).To(Equal(0), "kubectl captf %s: %s%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// The plugin's verbs as binaries against the sandbox, with real terraform (docs/cli.md): what
// they print (text and JSON), their exit codes, and that each writes only the annotation a
// person would write with kubectl, judged by the same admission. The page's examples are
// written for namespace prod and its Cluster prod: the spec is that Cluster, and runs them as
// the page writes them (test/doccmd).
var _ = Describe(doccmd.SpecCLI, func() {
	It("shows status and plans, approves exactly the pending plan once, refuses a stale one, and runs refresh, restore, unlock, retry and abandon", func() {
		const ns, name, page = "prod", "prod", "docs/cli.md"
		sb := shared
		createNamespace(sb, ns)
		docs := newDocShell(GinkgoT().TempDir(), "KUBECONFIG="+sb.Kubeconfig(),
			"PATH="+buildPlugin()+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		planFixture(sb, ns, name, "applyPolicy: Manual", "job: {lockTimeoutSeconds: 0}")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		kind := infrav1.TerraformClusterKind
		ref := "terraformcluster/" + name
		suffix := naming.StateSuffix(ns, kind, name)
		first := stateOf(sb, kind, ns, name)
		// The backup of the first apply is listed once bookkeeping took it.
		Eventually(func() []infrav1.StateBackup {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			return o.Status.StateBackups
		}).ShouldNot(BeEmpty())

		By("status of a Ready object: a tree, exit 0; JSON says the same, with the state's lineage and newest backup serial")
		text := captfOK(sb, ns, "status", ref)
		Expect(text).To(MatchRegexp(`(?m)^TerraformCluster/` + name + `  Ready \S+ ago provisioned$`))
		Expect(text).To(MatchRegexp(`last run:  Apply \S+ Succeeded`))
		Expect(text).To(ContainSubstring("state:     lineage " + first.Lineage + ", newest backup serial " + strconv.FormatInt(first.Serial, 10)))
		var rep struct {
			Objects []struct {
				Kind, Name, UID string
				Ready           *metav1.Condition
				PendingPlan     *infrav1.PlanRecord
				State           struct {
					Lineage            string
					NewestBackupSerial *int64
				}
			}
			ExitCode int
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "status", ref, "-o", "json")), &rep)).To(Succeed())
		Expect(rep.ExitCode).To(Equal(0))
		Expect(rep.Objects).To(HaveLen(1))
		Expect(rep.Objects[0].Kind).To(Equal(kind))
		Expect(rep.Objects[0].UID).To(Equal(string(o.UID)))
		Expect(rep.Objects[0].Ready.Status).To(Equal(metav1.ConditionTrue))
		Expect(rep.Objects[0].State.Lineage).To(Equal(first.Lineage))
		Expect(*rep.Objects[0].State.NewestBackupSerial).To(Equal(first.Serial))
		Expect(captfOK(sb, ns, "status", "-o", "yaml")).To(ContainSubstring("exitCode: 0"))
		Expect(captfOK(sb, ns, "status")).To(HavePrefix("Cluster "+ns+"/"+name+"\n  └─ TerraformCluster/"+name+"  Ready"), "the namespace, grouped by Cluster")

		By("status --cluster puts the Cluster at the root; kubectl finds the plugin on PATH as `kubectl captf`")
		tree := captfOK(sb, ns, "status", "--cluster", name)
		Expect(tree).To(HavePrefix("Cluster " + ns + "/" + name + "  "))
		Expect(tree).To(ContainSubstring("└─ TerraformCluster/" + name + "  Ready"))
		viaKubectl := exec.Command(filepath.Join(binDir, "kubectl"), "captf", "-n", ns, "status", "--cluster", name)
		viaKubectl.Env = append(os.Environ(), "KUBECONFIG="+sb.Kubeconfig(), "PATH="+buildPlugin()+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := viaKubectl.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "kubectl captf: %s", out)
		Expect(string(out)).To(ContainSubstring("└─ TerraformCluster/" + name + "  Ready"))
		By("trace as the page shows it: the Cluster, its TerraformCluster, the Job of its last run and that Job's pod")
		// The page's trace shows the Cluster's Available condition, which the Cluster API core
		// manager writes on its own schedule: on a loaded machine it had not yet, one second
		// after the apply (the trace then says "no condition reported").
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
			g.Expect(meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterAvailableCondition)).NotTo(BeNil())
		}, time.Minute).Should(Succeed(), "Cluster API reports the Cluster's Available condition")
		tr := docs.run("", page, "kubectl captf -n prod trace prod")
		Expect(tr.code).To(Or(Equal(0), Equal(2)), "a report, whether or not the Cluster is Available: %s", tr.out)
		Expect(tr.out).To(MatchRegexp(`(?m)^\S* ?Cluster/prod  Available=`))
		Expect(tr.out).To(MatchRegexp(`(?m)^[├└]─ TerraformCluster/prod  Ready=True `))
		Expect(tr.out).To(MatchRegexp(`(?m)^[│ ]  └─ Job/\S+  Complete=True \S+ .*; Apply, last run$`))
		Expect(tr.out).To(MatchRegexp(`(?m)^[│ ]     └─ Pod/\S+  Succeeded$`))
		missing := captf(sb, ns, "", "status", "--cluster", "no-such-cluster")
		Expect(missing.code).To(Equal(2), "a named Cluster that does not exist")
		Expect(missing.stdout).To(ContainSubstring("Cluster " + ns + "/no-such-cluster: not found"))

		By("restore without --serial lists the backups (text, as the page shows it, and JSON)")
		listed := docs.run("", page, "kubectl captf -n prod restore terraformcluster/prod")
		Expect(listed.code).To(BeZero(), listed.out)
		Expect(listed.out).To(HavePrefix(listed.cmd.Output[0]+"\n"), "the header the page shows")
		Expect(listed.out).To(MatchRegexp(`(?m)^%d\tcaptf-state-backup-%s-%d\t`, first.Serial, suffix, first.Serial))
		var backups struct{ Backups []infrav1.StateBackup }
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "restore", ref, "-o", "json")), &backups)).To(Succeed())
		Expect(backups.Backups).NotTo(BeEmpty())
		Expect(backups.Backups[0].Serial).To(Equal(first.Serial))

		By("changed inputs: a plan waits; status exits 3 and names it; plan show prints it (text and JSON)")
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		p1 := eventuallyWaiting(sb, o, "")
		waiting := docs.run("", page, "kubectl captf -n prod status --cluster prod")
		Expect(waiting.code).To(Equal(3), "Ready, but a plan waits for approval")
		Expect(waiting.out).To(HavePrefix("Cluster prod/prod  "))
		Expect(waiting.out).To(ContainSubstring("plan:      plan " + p1.ID + " waits for approval (Manual; create 1, update 0, replace 1, delete 0): kubectl captf plan show terraformcluster/prod"))
		Expect(waiting.out).To(ContainSubstring("! ApplyJobSucceeded=False PlanAwaitingApproval"))
		expectPageLabels(waiting)
		shown := docs.run("", page, "kubectl captf -n prod plan show terraformcluster/prod")
		Expect(shown.code).To(BeZero(), shown.out)
		expectPageLabels(shown)
		show := shown.out
		Expect(show).To(HavePrefix(kind + " " + ns + "/" + name + ": plan " + p1.ID + "\n"))
		Expect(show).To(ContainSubstring("changes:       create 1, update 0, replace 1, delete 0"))
		Expect(show).To(ContainSubstring("terraform_data.node must be replaced"))
		Expect(show).To(ContainSubstring("terraform_data.extra[0] will be created"))
		Expect(show).To(ContainSubstring("approve:       kubectl captf approve " + ref))
		rec1 := planRecordIn(sb, ns, p1.Secret)
		var view struct {
			Pending      *infrav1.PlanRecord
			Secret       string
			SecretPlanID string
			Record       *runnerapi.PlanRecord
			Problem      string
			Text         string
			Plan         struct {
				ResourceChanges []struct {
					Address string
				} `json:"resource_changes"`
			}
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "plan", "show", ref, "-o", "json")), &view)).To(Succeed())
		Expect(view.Pending.ID).To(Equal(p1.ID))
		Expect(view.Pending.Serial).To(Equal(first.Serial))
		Expect(view.Secret).To(Equal(p1.Secret))
		Expect(view.SecretPlanID).To(Equal(p1.ID))
		Expect(view.Record.FileSHA256).To(Equal(rec1.FileSHA256))
		Expect(view.Problem).To(BeEmpty())
		Expect(view.Text).To(ContainSubstring("Plan: 2 to add, 0 to change, 1 to destroy."))
		Expect(view.Plan.ResourceChanges).To(ContainElements(HaveField("Address", "terraform_data.node"), HaveField("Address", "terraform_data.extra[0]")),
			"plan show -o json carries the JSON plan")

		By("the inputs change again: the plugin refuses an approval of the old ID with the reason, and writes nothing")
		setVariables(sb, ns, name, `{"generation":2,"extra":2}`)
		p2 := eventuallyWaiting(sb, o, p1.ID)
		stale := captf(sb, ns, "", "approve", ref, "--plan-id", p1.ID, "--yes")
		Expect(stale.code).To(Equal(1))
		Expect(stale.stderr).To(ContainSubstring("refused: plan " + p1.ID + " is not the one that waits: the plan that waits for approval is " + p2.ID))
		AddReportEntry("kubectl captf approve of a superseded plan", strings.TrimSpace(stale.stderr))
		// The page's approval names a plan ID of its own example: refused the same way.
		other := docs.run("", page, "kubectl captf -n prod approve terraformcluster/prod --plan-id")
		Expect(other.code).To(Equal(1))
		Expect(other.out).To(ContainSubstring("refused: plan 7b92ef05b5e7501042311f90bee3e4b4 is not the one that waits: the plan that waits for approval is " + p2.ID +
			" (create 2, update 0, replace 1, delete 0) on TerraformCluster prod/prod"))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))

		By("approve asks first: answered no, nothing is written")
		no := captf(sb, ns, "n\n", "approve", ref)
		Expect(no.code).To(Equal(1))
		Expect(no.stdout).To(ContainSubstring("plan " + p2.ID + " on " + kind + " " + ns + "/" + name + " (create 2, update 0, replace 1, delete 0; waits because: Manual):"))
		Expect(no.stdout).To(ContainSubstring("Approve plan " + p2.ID + "? [y/N]"))
		Expect(no.stderr).To(ContainSubstring("not confirmed: nothing was written"))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies), "nothing applied")

		By("a user outside the approver groups (RBAC to get and patch the object, none to read Secrets): plan show shows the record without the text, and the policy refuses the approval as it refuses kubectl annotate")
		grantDevs(sb, ns)
		devShow := captf(sb, ns, "", "plan", "show", ref, "--as", "dev", "--as-group", "devs")
		Expect(devShow.code).To(Equal(0), devShow.stderr)
		Expect(devShow.stdout).To(HavePrefix(kind + " " + ns + "/" + name + ": plan " + p2.ID + "\n"))
		Expect(devShow.stdout).To(ContainSubstring("(the plan text is in Secret " + p2.Secret + ", which you may not read: "))
		dev := captf(sb, ns, "", "approve", ref, "--yes", "--as", "dev", "--as-group", "devs")
		Expect(dev.code).To(Equal(1))
		Expect(dev.stderr).To(ContainSubstring("ValidatingAdmissionPolicy"))
		Expect(dev.stderr).To(ContainSubstring("dev may not set " + infrav1.ApprovePlanAnnotation))
		AddReportEntry("kubectl captf approve by a non-approver", strings.TrimSpace(dev.stderr))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))

		By("answered yes: the plugin names the pending plan's ID, and exactly that plan file is applied, once")
		rec2 := planRecordIn(sb, ns, p2.Secret)
		yes := docs.run("y\n", page, "kubectl captf -n prod approve terraformcluster/prod")
		Expect(yes.code).To(Equal(0), yes.out)
		Expect(yes.out).To(ContainSubstring("Approve plan " + p2.ID + "? [y/N]: "))
		Expect(yes.out).To(ContainSubstring("approved plan " + p2.ID + " on " + kind + " " + ns + "/" + name + ": the next pass applies exactly this plan, once"))
		job := applyJobOf(sb, ns, name, p2.ID)
		Expect(eventuallyFinished(sb, job).Status.Succeeded).To(Equal(int32(1)))
		result := resultOf(sb, runOf(sb, job.Name))
		Expect(result.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p2.ID, FileSHA256: rec2.FileSHA256}), "the result names the approved plan file")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p2.ID))
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
			g.Expect(o.Status.PendingPlan).To(BeNil())
		}).Should(Succeed())
		eventuallyReady(sb, o)
		applied := stateOf(sb, kind, ns, name)
		Expect(addresses(applied)).To(Equal([]string{"terraform_data.extra[0]", "terraform_data.extra[1]", "terraform_data.network", "terraform_data.node"}))
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 5*time.Second).Should(Equal(applies+1), "one apply: the approved plan's")
		again := captf(sb, ns, "", "approve", ref, "--yes")
		Expect(again.code).To(Equal(1))
		Expect(again.stderr).To(ContainSubstring("refused: no plan waits for approval on " + kind + " " + ns + "/" + name))

		By("refresh asks for one refresh-only run with the request's value; under Manual a refresh-only plan that finds nothing answers it")
		Expect(captfOK(sb, ns, "refresh", ref, "--value", "cli-e2e-1")).To(ContainSubstring("refresh cli-e2e-1 requested on " + kind))
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.RefreshAnnotation), "the request is answered")
		}).Should(Succeed())
		var refreshJobs []string
		for _, j := range jobsOf(sb, kind, ns, name, "") {
			if j.Annotations[infrav1.RefreshAnnotation] == "cli-e2e-1" {
				refreshJobs = append(refreshJobs, j.Name)
			}
		}
		Expect(refreshJobs).NotTo(BeEmpty(), "a Job recorded the request's value")

		By("restore refuses a serial that is no backup, and restores one that is")
		Eventually(func() []infrav1.StateBackup {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			return o.Status.StateBackups
		}).Should(ContainElement(HaveField("Serial", applied.Serial)))
		bad := captf(sb, ns, "", "restore", ref, "--serial", "999", "--yes")
		Expect(bad.code).To(Equal(1))
		Expect(bad.stderr).To(ContainSubstring("refused: serial 999 is no backup of " + kind + " " + ns + "/" + name +
			" and not a version the replica store was seen to hold (backups: "))
		before := jobsOf(sb, kind, ns, name, infrav1.OperationRestore)
		Expect(captfOK(sb, ns, "restore", ref, "--serial", strconv.FormatInt(first.Serial, 10), "--yes")).To(ContainSubstring(fmt.Sprintf("restore of serial %d requested", first.Serial)))
		restore := eventuallyNew(sb, kind, ns, name, infrav1.OperationRestore, before)
		Expect(eventuallyFinished(sb, restore).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.RestoreStateAnnotation))
		}).Should(Succeed())
		restored := stateOf(sb, kind, ns, name)
		Expect(addresses(restored)).To(Equal(addresses(first)), "the first apply's resources, restored")
		Expect(restored.Serial).To(BeNumerically(">", applied.Serial), "pushed as the newest state")
		eventuallyReady(sb, o)

		By("a person's terraform holds the state lock: unlock shows the holder and the runbook's commands, and releases nothing")
		lockID := "ops-laptop-cli-e2e"
		holdStateLock(sb, ns, naming.StateLockLeaseName(suffix), lockID)
		unlocked := docs.run("", page, "kubectl captf -n prod unlock terraformcluster/prod")
		Expect(unlocked.code).To(BeZero(), unlocked.out)
		expectPageLabels(unlocked)
		lock := unlocked.out
		Expect(lock).To(ContainSubstring("lock ID:   " + lockID))
		Expect(lock).To(ContainSubstring("Who:       ops@laptop"))
		Expect(lock).To(ContainSubstring("verdict:   HeldOutsideCAPTF"))
		Expect(lock).To(ContainSubstring("$ terraform force-unlock -force " + lockID))
		var lv struct {
			LockID, Verdict string
			Commands        []string
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "unlock", ref, "-o", "json")), &lv)).To(Succeed())
		Expect(lv.LockID).To(Equal(lockID))
		Expect(lv.Verdict).To(Equal("HeldOutsideCAPTF"))
		Expect(lv.Commands).To(HaveLen(2))
		Expect(kubectl(sb, "-n", ns, "get", "lease", naming.StateLockLeaseName(suffix), "-o", "jsonpath={.spec.holderIdentity}")).To(Equal(lockID), "unlock wrote nothing")

		By("a plan fails on the lock: status exits 2 and says why")
		setVariables(sb, ns, name, `{"generation":3,"extra":0}`)
		Eventually(func(g Gomega) {
			c := readyCondition(sb, o)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.StateLockedReason))
			g.Expect(o.Annotations).To(HaveKey(infrav1.RetryAtAnnotation))
		}).Should(Succeed())
		locked := captf(sb, ns, "", "status", ref)
		Expect(locked.code).To(Equal(2))
		Expect(locked.stdout).To(ContainSubstring("NotReady (StateLocked)"))
		Expect(locked.stdout).To(ContainSubstring("retry at:  "))

		By("logs --result reads the failed Job's result document (text and JSON); logs without it prints the log the node serves")
		logged := docs.run("", page, "kubectl captf -n prod logs terraformcluster/prod --result")
		Expect(logged.code).To(BeZero(), logged.out)
		expectPageLabels(logged)
		res := logged.out
		Expect(res).To(MatchRegexp(`^Job \S+, pod \S+:\n  operation Plan, outcome Failed, binary terraform\n`))
		Expect(res).To(ContainSubstring("Error acquiring the state lock"))
		var rv struct {
			Job    string
			Result *runnerapi.Result
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "logs", ref, "--operation", "Plan", "--result", "-o", "json")), &rv)).To(Succeed())
		Expect(rv.Result.Outcome).To(Equal(runnerapi.OutcomeFailed))
		Expect(rv.Result.LockHolder).NotTo(BeNil())
		Expect(rv.Result.LockHolder.Who).To(Equal("ops@laptop"))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(rv.Job).To(Equal(o.Status.LastRun.Job), "the last Plan Job is the last run")
		restoreLog := captf(sb, ns, "", "logs", ref, "--operation", "Restore", "--request-timeout", "20s")
		Expect(restoreLog.stderr).To(HavePrefix("Job " + restore.Name + " (Restore), pod "))
		Expect(restoreLog.code).To(Equal(0), "the node serves the pod's log, as a kubelet (docs/sandbox.md)")
		Expect(restoreLog.stdout).To(MatchRegexp(`msg="run succeeded" .*operation=Restore`), "the runner's log of the Restore Job")

		By("the person releases the lock with the command unlock printed; retry runs the plan now instead of after the backoff")
		shell(sb, lv.Commands[1])
		Expect(captfOK(sb, ns, "unlock", ref)).To(ContainSubstring("verdict:   Free"))
		retried := captfOK(sb, ns, "retry", ref)
		Expect(retried).To(ContainSubstring("retry now on " + kind + " " + ns + "/" + name))
		Expect(retried).To(ContainSubstring("last failure: "))
		p3 := eventuallyWaiting(sb, o, p2.ID)
		Expect(p3.Replace).To(Equal(int32(1)))
		Expect(captfOK(sb, ns, "retry", ref)).To(ContainSubstring("nothing waits for a retry"))

		By("abandon prints what is let go and needs the UID; the guard judges it like kubectl annotate (a healthy object is refused)")
		noUID := captf(sb, ns, "", "abandon", ref)
		Expect(noUID.code).To(Equal(1))
		Expect(noUID.stdout).To(ContainSubstring("Secret " + naming.StateSecretName(suffix) + " (state) is kept"))
		Expect(noUID.stderr).To(ContainSubstring("is not the UID of " + kind))
		guarded := captf(sb, ns, "", "abandon", ref, "--uid", string(o.UID))
		Expect(guarded.code).To(Equal(1))
		Expect(guarded.stderr).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`))
		AddReportEntry("kubectl captf abandon of a healthy object", strings.TrimSpace(guarded.stderr))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.AbandonInfrastructureAnnotation))
	})
})

// status of a Cluster with a machine: the Cluster at the root, its TerraformCluster and its
// TerraformMachine as branches, in text and JSON.
var _ = Describe("kubectl captf status of a Cluster and its machine, with real Terraform", func() {
	It("shows the TerraformCluster and the TerraformMachine under their Cluster and exits 0 once both are Ready", func() {
		const ns, name = "cli-tree", "ct"
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		applyFixture(sb, ns, "machine.yaml", name, 0)
		eventuallyReady(sb, tc(ns, name), tm(ns, name+"-m0"))

		tree := captfOK(sb, ns, "status", "--cluster", name)
		Expect(tree).To(MatchRegexp(`(?s)^Cluster ` + ns + `/` + name + `  .*\n  ├─ TerraformCluster/` + name + `  Ready .*\n  └─ TerraformMachine/` + name + `-m0  Ready \S+ ago provisioned\n`))
		var rep struct {
			Cluster struct{ Name string }
			Objects []struct {
				Kind, Name, Cluster string
				Provisioned         bool
			}
			ExitCode int
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "status", "--cluster", name, "-o", "json")), &rep)).To(Succeed())
		Expect(rep.Cluster.Name).To(Equal(name))
		Expect(rep.ExitCode).To(Equal(0))
		Expect(rep.Objects).To(HaveLen(2))
		Expect(rep.Objects[0]).To(And(HaveField("Kind", infrav1.TerraformClusterKind), HaveField("Name", name), HaveField("Cluster", name), HaveField("Provisioned", true)))
		Expect(rep.Objects[1]).To(And(HaveField("Kind", infrav1.TerraformMachineKind), HaveField("Name", name+"-m0"), HaveField("Cluster", name), HaveField("Provisioned", true)))
		machine := captfOK(sb, ns, "status", "tfm/"+name+"-m0")
		Expect(machine).To(HavePrefix("TerraformMachine/" + name + "-m0  Ready"))

		By("the inventories real Terraform left: the counts in the tree, the addresses with --resources, the list in JSON")
		Expect(tree).To(MatchRegexp(`(?m)^  │  resources: 2 \(2 managed, 0 data\) at serial \d+$`), "the TerraformCluster's two terraform_data")
		Expect(tree).To(MatchRegexp(`(?m)^     resources: 1 \(1 managed, 0 data\) at serial \d+$`), "the TerraformMachine's node")
		listed := captfOK(sb, ns, "status", "--cluster", name, "--resources")
		Expect(listed).To(MatchRegexp(`(?m)^  │  resources: 2 .*\n  │    terraform_data.network\n  │    terraform_data.slow\n`))
		Expect(listed).To(MatchRegexp(`(?m)^     resources: 1 .*\n       terraform_data.node\n`))
		var inv struct {
			Objects []struct {
				Kind      string
				Inventory *struct {
					Serial         int64
					Lineage        string
					Total, Managed int
					Truncated      bool
					Resources      []struct{ Address, Type, Mode, Module, Provider string }
				}
			}
		}
		Expect(json.Unmarshal([]byte(captfOK(sb, ns, "status", "--cluster", name, "-o", "json")), &inv)).To(Succeed())
		Expect(inv.Objects).To(HaveLen(2))
		for i, want := range [][]string{{"terraform_data.network", "terraform_data.slow"}, {"terraform_data.node"}} {
			got := inv.Objects[i].Inventory
			Expect(got).NotTo(BeNil(), "the inventory of the %s", inv.Objects[i].Kind)
			Expect(got.Total).To(Equal(len(want)))
			Expect(got.Truncated).To(BeFalse())
			var addrs []string
			for _, r := range got.Resources {
				Expect(r.Mode).To(Equal("managed"))
				Expect(r.Type).To(Equal("terraform_data"))
				Expect(r.Provider).To(ContainSubstring("terraform"))
				addrs = append(addrs, r.Address)
			}
			Expect(addrs).To(Equal(want))
			st := stateOf(sb, inv.Objects[i].Kind, ns, []string{name, name + "-m0"}[i])
			Expect(got.Serial).To(Equal(st.Serial), "taken from the state the last apply left")
			Expect(got.Lineage).To(Equal(st.Lineage))
		}
	})
})

// drift check asks for one check now (captf.io/drift-check): with an hourly schedule nothing
// is due, yet the verb's request starts a Drift Job at once, real terraform finds the change
// made behind its back, and the request is answered.
var _ = Describe(doccmd.SpecDrift, func() {
	It("starts a drift check now although none is due, reports what it found, and answers the request", func() {
		const ns, name = "cli-drift", "cd"
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		kind, ref := infrav1.TerraformClusterKind, "tfc/"+name
		checks := func() int { return countRuns(sb, ns, name, infrav1.OperationDrift) }
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"drift":{"interval":"1h","mode":"Report"}}}`)
		tamperState(sb, ns, name, "changed-by-hand")
		Consistently(checks, 5*time.Second).Should(BeZero(), "the schedule says the first check is an hour away")

		By("drift check writes captf.io/drift-check with the value, and says when the check runs")
		docs := newDocShell(GinkgoT().TempDir(), "KUBECONFIG="+sb.Kubeconfig(),
			"PATH="+buildPlugin()+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		began := time.Now()
		// The page's example, on this spec's object.
		out := docs.ok("docs/cli.md", "kubectl captf -n prod drift check", "-n prod", "-n "+ns, "terraformcluster/prod", "terraformcluster/"+name)
		Expect(out).To(ContainSubstring("drift check ticket-4711 requested on " + kind + " " + ns + "/" + name + ": a Drift Job runs as soon as nothing else runs"))
		Expect(strings.TrimSpace(out)).To(Equal(strings.NewReplacer("prod/prod", ns+"/"+name).Replace(pageCommand("docs/cli.md", "kubectl captf -n prod drift check").Output[0])),
			"what the page shows, for this object")

		By("one Drift Job runs at once, records the request, finds the change, and the request is answered")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.DriftCheckAnnotation), "the request is answered")
			c := conditionOf(sb, o, infrav1.DriftDetectedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(*c).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.DriftFoundReason),
				HaveField("Message", ContainSubstring("0 to create, 1 to update, 0 to replace, 0 to delete"))))
		}, time.Minute).Should(Succeed())
		AddReportEntry("drift check asked for: answered after", since(began))
		Expect(checks()).To(Equal(1))
		Expect(jobsOf(sb, kind, ns, name, infrav1.OperationDrift)).To(ContainElement(
			HaveField("ObjectMeta.Annotations", HaveKeyWithValue(infrav1.DriftCheckAnnotation, "ticket-4711"))))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(1), "mode Report applies nothing")
		Expect(kubectl(sb, "-n", ns, "get", "events", "--field-selector", "reason=DriftCheckAnswered")).To(
			ContainSubstring("answered the drift check asked for (" + infrav1.DriftCheckAnnotation + "=ticket-4711): it found drift"))

		By("status now exits 3: Ready, and drift was found")
		Expect(captf(sb, ns, "", "status", ref).code).To(Equal(3))
		Consistently(checks, 5*time.Second).Should(Equal(1), "answered: no second check")

		By("docs/drift.md's two ways to ask, from a shell whose namespace is the object's: kubectl annotate, then the plugin without --value; one more check each, each answered")
		page := "docs/drift.md"
		nsDocs := namespacedShell(sb, ns, buildPlugin())
		answered := func(n int) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(checks()).To(Equal(n))
				g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				g.Expect(o.Annotations).NotTo(HaveKey(infrav1.DriftCheckAnnotation), "the request is answered")
			}, time.Minute).Should(Succeed())
		}
		nsDocs.ok(page, "kubectl annotate terraformcluster demo captf.io/drift-check=", "demo", name)
		answered(2)
		nsDocs.ok(page, "kubectl captf drift check terraformcluster/demo", "demo", name)
		answered(3)
		events := nsDocs.ok(page, "kubectl get events --field-selector reason=DriftCheckAnswered")
		Expect(events).To(ContainSubstring("(" + infrav1.DriftCheckAnnotation + "=2026-12-03T15:00:00Z): it found drift"))
		Consistently(checks, 3*time.Second).Should(Equal(3), "each request answered once")
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(1), "mode Report applies nothing")
	})
})
