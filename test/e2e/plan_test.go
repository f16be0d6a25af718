package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// planFixture applies testdata/plans.yaml into ns as a cluster named name, with the spec
// lines of its apply policy (each as it would stand under spec:).
func planFixture(sb target, ns, name string, policy ...string) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", "plans.yaml"))
	Expect(err).NotTo(HaveOccurred())
	doc := strings.ReplaceAll(string(raw), "CLUSTER", name)
	doc = strings.ReplaceAll(doc, "  POLICY", "  "+strings.Join(policy, "\n  "))
	f := filepath.Join(GinkgoT().TempDir(), name+".yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}

// setVariables patches spec.variables (a JSON object) with kubectl.
func setVariables(sb target, ns, name, vars string) {
	GinkgoHelper()
	kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":`+vars+`}}`)
}

// eventuallyWaiting waits until the object's pending plan is not the one named by not, and
// ApplyJobSucceeded says PlanAwaitingApproval; it returns the pending plan.
func eventuallyWaiting(sb target, o *infrav1.TerraformCluster, not string) *infrav1.PendingPlan {
	GinkgoHelper()
	var p *infrav1.PendingPlan
	Eventually(func(g Gomega) {
		g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		p = o.Status.PendingPlan
		g.Expect(p).NotTo(BeNil(), "no plan waits yet; the object's conditions: %s", conditionsLine(o.Status.Conditions))
		g.Expect(p.ID).NotTo(Equal(not), "plan %s still waits", not)
		c := meta.FindStatusCondition(o.Status.Conditions, infrav1.ApplyJobSucceededCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.PlanAwaitingApprovalReason), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "docs/plans.md: ApplyJobSucceeded is False while a plan waits")
		g.Expect(c.Message).To(ContainSubstring(p.ID))
	}).Should(Succeed())
	// As docs/plans.md tells a person to wait for it.
	kubectl(sb, "wait", "-n", o.Namespace, "terraformcluster/"+o.Name, "--for=condition=ApplyJobSucceeded=False", "--timeout=30s")
	return p
}

// conditionsLine prints conditions one per line for a failure message.
func conditionsLine(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// planRecordIn reads the record the state channel stored in the object's plan Secret.
func planRecordIn(sb target, ns, secret string) runnerapi.PlanRecord {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: secret}, s)).To(Succeed())
	var rec runnerapi.PlanRecord
	Expect(json.Unmarshal(s.Data[runnerapi.PlanRecordKey], &rec)).To(Succeed())
	return rec
}

// applyJobOf waits until the object has an Apply Job of the saved plan id (annotation
// captf.io/plan-id) and returns it.
func applyJobOf(sb target, ns, name, id string) *batchv1.Job {
	GinkgoHelper()
	var job *batchv1.Job
	Eventually(func() *batchv1.Job {
		for _, j := range jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply) {
			if j.Annotations[infrav1.PlanIDAnnotation] == id {
				job = &j
			}
		}
		return job
	}).ShouldNot(BeNil(), "no Apply Job of plan %s", id)
	return job
}

// runOf returns what the executor ran for a Job (it ran it once: backoffLimit 0).
func runOf(sb *sandbox.Sandbox, job string) executor.Run {
	GinkgoHelper()
	var runs []executor.Run
	Eventually(func() []executor.Run {
		runs = nil
		for _, r := range readHistory(sb.HistoryFile()) {
			if r.Job == job {
				runs = append(runs, r)
			}
		}
		return runs
	}).Should(HaveLen(1), "the executor's record of Job %s", job)
	return runs[0]
}

// resultOf reads the runner's result of a run: its main container's termination message, as
// the executor wrote it into the Pod's folder.
func resultOf(sb *sandbox.Sandbox, r executor.Run) runnerapi.Result {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(sb.WorkDir(), "pods", r.Namespace, r.Pod, "termination-log"))
	Expect(err).NotTo(HaveOccurred())
	res, err := runnerapi.ParseResult(raw)
	Expect(err).NotTo(HaveOccurred(), "result of %s: %s", r.Job, raw)
	return res
}

// countRuns counts what the executor ran for an object, by operation.
func countRuns(sb *sandbox.Sandbox, ns, name string, op infrav1.Operation) int {
	return len(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, op))
}

// addresses lists the resource instances a state tracks, sorted ("terraform_data.extra[0]").
func addresses(st *tfState) []string {
	var out []string
	for _, r := range st.Resources {
		for i := range r.Instances {
			a := r.Type + "." + r.Name
			if r.Name == "extra" {
				a += "[" + strconv.Itoa(i) + "]"
			}
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// nodeGeneration is the generation terraform_data.node was last created with.
func nodeGeneration(st *tfState) any {
	for _, r := range st.Resources {
		if r.Type == "terraform_data" && r.Name == "node" && len(r.Instances) == 1 {
			dyn, _ := r.Instances[0].Attributes["triggers_replace"].(map[string]any)
			if v, ok := dyn["value"].([]any); ok && len(v) == 1 {
				return v[0]
			}
		}
	}
	return nil
}

// shell runs a command line with bash, bin/ first on PATH and the sandbox's kubeconfig, as a
// person would paste it from the docs.
func shell(sb target, line string) string {
	GinkgoHelper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+sb.Kubeconfig(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(GinkgoWriter, "$ %s\n%s", line, out)
	Expect(err).NotTo(HaveOccurred(), "%s: %s", line, out)
	return string(out)
}

// personsTerraform is a person's terraform (the Jobs' binary) with the kubernetes backend,
// pointed at an object's state in the sandbox.
type personsTerraform struct{ dir string }

func newPersonsTerraform(sb target, ns, suffix string) personsTerraform {
	GinkgoHelper()
	p := personsTerraform{dir: GinkgoT().TempDir()}
	backend := fmt.Sprintf("terraform {\n  backend \"kubernetes\" {\n    secret_suffix = %q\n    namespace     = %q\n    config_path   = %q\n  }\n}\n",
		suffix, ns, sb.Kubeconfig())
	Expect(os.WriteFile(filepath.Join(p.dir, "backend.tf"), []byte(backend), 0o600)).To(Succeed())
	p.run("init", "-input=false", "-no-color")
	return p
}

func (p personsTerraform) run(args ...string) []byte {
	GinkgoHelper()
	cmd := exec.Command(tf, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME="+p.dir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "$ %s %s\n%s", filepath.Base(tf), strings.Join(args, " "), stderr.String())
	Expect(err).NotTo(HaveOccurred(), "%s %s: %s", tf, strings.Join(args, " "), stderr.String())
	return []byte(stdout.String())
}

// bumpSerial writes the state back with a newer serial and the same resources (`state pull`,
// then `state push`), without the lock, which the person holds by hand.
func (p personsTerraform) bumpSerial() {
	GinkgoHelper()
	var st map[string]any
	Expect(json.Unmarshal(p.run("state", "pull"), &st)).To(Succeed())
	st["serial"] = int64(st["serial"].(float64)) + 1
	b, err := json.Marshal(st)
	Expect(err).NotTo(HaveOccurred())
	f := filepath.Join(p.dir, "pushed.tfstate")
	Expect(os.WriteFile(f, b, 0o600)).To(Succeed())
	p.run("state", "push", "-lock=false", f)
}

// holdStateLock takes an object's Terraform state lock as a person's terraform with the
// kubernetes backend holds it: the lock ID as the Lease's holder and the lock info as its
// annotation, no CAPTF pod or Job, so no Job of the object may break it (I8).
func holdStateLock(sb target, ns, lease, id string) {
	GinkgoHelper()
	info, err := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Info": "", "Who": "ops@laptop",
		"Version": "1.11.4", "Created": time.Now().UTC().Format(time.RFC3339Nano), "Path": ""})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		l := &coordinationv1.Lease{}
		if err := sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: lease}, l); err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			return fmt.Errorf("lock %s is held by %s", lease, *h)
		}
		l.Spec.HolderIdentity = &id
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations["app.terraform.io/lock-info"] = string(info)
		return sb.Client().Update(ctx, l)
	}).Should(Succeed())
}

// grantDevs lets the group devs read and patch TerraformClusters in ns, nothing else: RBAC lets
// their approval through, so only admission can refuse it.
func grantDevs(sb target, ns string) {
	GinkgoHelper()
	Expect(sb.Client().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "devs-edit"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformclusters"},
			Verbs: []string{"get", "patch"}}}})).To(Succeed())
	Expect(sb.Client().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "devs-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "devs-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}}})).To(Succeed())
}

// The plan workflow of docs/plans.md, with real terraform through the state channel, on the
// shared sandbox (whose manager runs with --plan-approver-groups=system:masters, the group of
// its kubectl user).
var _ = Describe(doccmd.SpecPlans, func() {
	It("Manual: plans instead of applying, applies the approved plan once, refuses old IDs, and a state change makes the approved plan stale", func() {
		const ns, name = "plans-manual", "pm"
		sb := shared
		createNamespace(sb, ns)
		grantDevs(sb, ns)
		planFixture(sb, ns, name, "applyPolicy: Manual")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		kind := infrav1.TerraformClusterKind
		suffix := naming.StateSuffix(ns, kind, name)
		first := stateOf(sb, kind, ns, name)
		Expect(addresses(first)).To(Equal([]string{"terraform_data.network", "terraform_data.node"}), "the first apply needs no plan")
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		Expect(applies).To(Equal(1))

		By("changed inputs (a replace and a create), with docs/plans.md's command: a Plan Job runs, the plan waits, nothing is applied")
		// docs/plans.md is written for namespace prod and its Cluster prod: this spec's names stand in.
		const page = "docs/plans.md"
		names := []string{"-n prod", "-n " + ns, "terraformcluster prod", "terraformcluster " + name}
		docs := newDocShell(GinkgoT().TempDir(), "KUBECONFIG="+sb.Kubeconfig(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		docs.ok(page, "kubectl -n prod patch terraformcluster prod --type=merge", names...)
		p1 := eventuallyWaiting(sb, o, "")
		Expect(p1).To(And(HaveField("Create", int32(1)), HaveField("Replace", int32(1)), HaveField("Update", int32(0)), HaveField("Delete", int32(0)),
			HaveField("Reason", string(infrav1.ApplyPolicyManual)), HaveField("Secret", naming.PlanSecretName(suffix))))
		Expect(p1.Addresses).To(ConsistOf("terraform_data.extra[0]", "terraform_data.node"))
		Expect(stateOf(sb, kind, ns, name).Serial).To(Equal(first.Serial), "a plan writes no state")
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies), "nothing was applied")
		Expect(countRuns(sb, ns, name, infrav1.OperationPlan)).To(Equal(1))

		By("what a person reads: kubectl get, the PlanSaved event, the full plan text (docs/plans.md)")
		table := docs.ok(page, "kubectl -n prod get terraformcluster prod", names...)
		Expect(strings.Fields(strings.SplitN(table, "\n", 2)[0])).To(Equal(strings.Fields(pageCommand(page, "kubectl -n prod get terraformcluster prod").Output[0])),
			"the columns the page shows")
		Expect(table).To(MatchRegexp(`PLAN\s+CREATE\s+UPDATE\s+REPLACE\s+DELETE`))
		// Zero counts print empty (the status omits them).
		Expect(table).To(MatchRegexp(p1.ID + `\s+1\s+1\s+\d+s\n`))
		// PROVISIONED true, READY True, no JOB or OPERATION: the object stays Ready while the plan waits.
		Expect(table).To(MatchRegexp(`PROVISIONED\s+READY\s+JOB\s+OPERATION\s+PLAN`))
		Expect(table).To(MatchRegexp(`\strue\s+True\s+` + p1.ID))
		Expect(kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason=PlanSaved")).To(ContainSubstring(p1.ID))
		text := docs.ok(page, "secret=$(kubectl -n prod get terraformcluster prod", names...)
		Expect(text).To(ContainSubstring("terraform_data.node must be replaced"))
		Expect(text).To(ContainSubstring("terraform_data.extra[0] will be created"))
		// The page's next command reads $secret, which the one before set in the reader's shell.
		changes := docs.with("secret="+p1.Secret).ok(page, `kubectl -n prod get secret "$secret" -o jsonpath='{.data.plan\.json}'`, names[:2]...)
		Expect(changes).To(And(MatchRegexp(`"address": "terraform_data.node",\s+"actions": \[\s+"delete",\s+"create"\s+\]`),
			MatchRegexp(`"address": "terraform_data.extra\[0\]",\s+"actions": \[\s+"create"\s+\]`)), "jq's view of plan.json")
		rec1 := planRecordIn(sb, ns, p1.Secret)
		Expect(rec1.ID).To(Equal(p1.ID))
		Expect(rec1.StateSerial).To(BeEquivalentTo(first.Serial))

		By("a user outside the approver groups may not approve it")
		out, err := run(sb.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, "--as=dev", "--as-group=devs",
			infrav1.ApprovePlanAnnotation+"="+p1.ID)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("ValidatingAdmissionPolicy"))
		Expect(out).To(ContainSubstring("dev may not set captf.io/approve-plan: only members of the groups system:masters may"))
		AddReportEntry("non-approver's approval", strings.TrimSpace(out))

		By("the inputs change again before the approval: a new plan supersedes it, and the old ID is refused at admission")
		setVariables(sb, ns, name, `{"generation":2,"extra":2}`)
		p2 := eventuallyWaiting(sb, o, p1.ID)
		Expect(p2).To(And(HaveField("Create", int32(2)), HaveField("Replace", int32(1))))
		out, err = run(sb.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.ApprovePlanAnnotation+"="+p1.ID)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`))
		Expect(out).To(ContainSubstring("the plan that waits for approval is " + p2.ID))
		AddReportEntry("approval of a superseded plan", strings.TrimSpace(out))
		Expect(stateOf(sb, kind, ns, name).Serial).To(Equal(first.Serial))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies), "still nothing applied")

		By("a person holds the state lock; the approved plan's Apply Job starts; the person pushes the state with the next serial and unlocks")
		lockID := "ops-laptop-plan-e2e"
		holdStateLock(sb, ns, naming.StateLockLeaseName(suffix), lockID)
		person := newPersonsTerraform(sb, ns, suffix)
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.ApprovePlanAnnotation+"="+p2.ID)
		staleJob := applyJobOf(sb, ns, name, p2.ID)
		person.bumpSerial()
		pushed := stateOf(sb, kind, ns, name).Serial
		Expect(pushed).To(BeNumerically(">", first.Serial))
		person.run("force-unlock", "-force", "-no-color", lockID)

		By("terraform refuses the stale plan: nothing is applied, the plan is spent, a new plan follows")
		Expect(eventuallyFinished(sb, staleJob).Status.Failed).To(Equal(int32(1)))
		staleRun := runOf(sb, staleJob.Name)
		Expect(staleRun.ExitCode).To(Equal(int32(runnerapi.ExitPlanRefused)))
		staleResult := resultOf(sb, staleRun)
		Expect(staleResult.PlanStale).To(BeTrue(), "the runner's result: %+v", staleResult)
		Expect(staleResult.AppliedPlan).To(BeNil())
		Eventually(func() string {
			return kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason=JobFailed,involvedObject.name="+name)
		}).Should(ContainSubstring("the saved plan is stale (the state changed since it was made); nothing was applied"))
		p3 := eventuallyWaiting(sb, o, p2.ID)
		Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p2.ID), "at most once: the stale plan is spent")
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
		Expect(o.Annotations).NotTo(HaveKey(infrav1.FailuresAnnotation), "a stale plan is no failure of the module: no backoff")
		afterStale := stateOf(sb, kind, ns, name)
		Expect(afterStale.Serial).To(Equal(pushed), "only the person's push moved the state")
		Expect(addresses(afterStale)).To(Equal(addresses(first)), "nothing was applied")
		Expect(nodeGeneration(afterStale)).To(Equal(float64(1)))
		Expect(planRecordIn(sb, ns, p3.Secret).StateSerial).To(BeEquivalentTo(pushed), "the new plan is made against the pushed state")
		out, err = run(sb.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.ApprovePlanAnnotation+"="+p2.ID)
		Expect(err).To(HaveOccurred(), "the spent plan cannot be approved again")
		Expect(out).To(ContainSubstring("the plan that waits for approval is " + p3.ID))
		AddReportEntry("stale plan: the runner's result", fmt.Sprintf("planStale=%v exit=%d; new plan %s", staleResult.PlanStale, staleRun.ExitCode, p3.ID))

		By("approving the new plan applies exactly that plan file, once")
		rec3 := planRecordIn(sb, ns, p3.Secret)
		docs.ok(page, "kubectl -n prod annotate terraformcluster prod captf.io/approve-plan=", append(slices.Clone(names), "7d1c0a59d1b5e2f8a2cc35b1e0c3e1f4", p3.ID)...)
		job := applyJobOf(sb, ns, name, p3.ID)
		Expect(eventuallyFinished(sb, job).Status.Succeeded).To(Equal(int32(1)))
		result := resultOf(sb, runOf(sb, job.Name))
		Expect(result.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
		Expect(result.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p3.ID, FileSHA256: rec3.FileSHA256}), "the result names the plan file that was approved")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p3.ID))
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
			g.Expect(o.Status.PendingPlan).To(BeNil())
		}).Should(Succeed())
		eventuallyReady(sb, o)
		Expect(docs.ok(page, "kubectl -n prod get jobs -l captf.io/owner-name=prod,", "-n prod", "-n "+ns, "owner-name=prod", "owner-name="+name)).To(ContainSubstring(p3.ID),
			"the page's listing of the Apply Jobs' plan IDs")
		final := stateOf(sb, kind, ns, name)
		Expect(addresses(final)).To(Equal([]string{"terraform_data.extra[0]", "terraform_data.extra[1]", "terraform_data.network", "terraform_data.node"}))
		Expect(nodeGeneration(final)).To(Equal(float64(2)))
		Expect(final.Serial).To(BeNumerically(">", pushed))
		AddReportEntry("approved apply: the runner's result", fmt.Sprintf("appliedPlan %s, plan file sha256 %s", result.AppliedPlan.ID, result.AppliedPlan.FileSHA256))

		By("at most once: nothing more runs, nothing is applied twice")
		Consistently(func() []int {
			return []int{countRuns(sb, ns, name, infrav1.OperationApply), countRuns(sb, ns, name, infrav1.OperationPlan)}
		}, 5*time.Second).Should(Equal([]int{applies + 2, 3}), "applies: the first, the stale one, the approved one; plans: three")
		Expect(addresses(stateOf(sb, kind, ns, name))).To(Equal(addresses(final)))
	})

	It("destructive guard: an automatic object applies a pure create at once and stops a replace for approval", func() {
		const ns, name = "plans-guard", "pg"
		sb := shared
		createNamespace(sb, ns)
		planFixture(sb, ns, name, "applyPolicy: Automatic", "destructiveChanges: RequireApproval")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		kind := infrav1.TerraformClusterKind
		first := stateOf(sb, kind, ns, name)

		By("a pure create: planned, then applied without approval")
		setVariables(sb, ns, name, `{"generation":1,"extra":1}`)
		// The apply of the saved plan is counted once its Job finished: the plan is spent.
		var viaPlan string
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			viaPlan = o.Annotations[infrav1.AppliedPlanAnnotation]
			g.Expect(viaPlan).NotTo(BeEmpty(), "no plan applied yet")
			g.Expect(o.Annotations).NotTo(HaveKey(infrav1.PendingPlanAnnotation))
		}).Should(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation), "nobody approved it")
		Expect(addresses(stateOf(sb, kind, ns, name))).To(ContainElement("terraform_data.extra[0]"))
		Expect(countRuns(sb, ns, name, infrav1.OperationPlan)).To(Equal(1))
		Expect(applyJobOf(sb, ns, name, viaPlan).Annotations).To(HaveKeyWithValue(infrav1.PlanIDAnnotation, viaPlan), "the create was applied from its saved plan")
		eventuallyReady(sb, o)
		created := stateOf(sb, kind, ns, name)
		Expect(nodeGeneration(created)).To(Equal(nodeGeneration(first)))

		By("a replace: planned, and it waits for approval")
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		p := eventuallyWaiting(sb, o, "")
		Expect(p).To(And(HaveField("Replace", int32(1)), HaveField("Create", int32(0)), HaveField("Reason", "DestructiveChanges")))
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 3*time.Second).Should(Equal(applies))
		Expect(stateOf(sb, kind, ns, name).Serial).To(Equal(created.Serial), "the replace was not applied")

		By("approved: the replace applies")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p.ID)
		Eventually(func() map[string]string {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			return o.Annotations
		}).Should(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p.ID))
		Expect(nodeGeneration(stateOf(sb, kind, ns, name))).To(Equal(float64(2)))
		eventuallyReady(sb, o)
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 1))
	})
})
