package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// target is a sandbox the tests talk to: one this process runs, or the sandbox binary's.
type target interface {
	Client() client.Client
	Kubeconfig() string
}

// attached is a sandbox run by another process, reached through its kubeconfig.
type attached struct {
	kubeconfig string
	client     client.Client
	history    string
}

func (a *attached) Client() client.Client { return a.client }
func (a *attached) Kubeconfig() string    { return a.kubeconfig }
func (a *attached) HistoryFile() string   { return a.history }

// attach reaches the sandbox whose kubeconfig and work folder are given.
func attach(kubeconfig, workDir string) *attached {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	scheme, err := sandbox.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return &attached{kubeconfig: kubeconfig, client: c, history: filepath.Join(workDir, "runs.jsonl")}
}

// childrenOf lists the live children of a process.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

// run runs a tool from bin/ with KUBECONFIG set and returns its combined output.
func run(kubeconfig, tool string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, tool), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "$ %s %s\n%s", tool, strings.Join(args, " "), out.String())
	return out.String(), err
}

// kubectl runs kubectl against a sandbox and fails the spec when it fails.
func kubectl(sb target, args ...string) string {
	GinkgoHelper()
	out, err := run(sb.Kubeconfig(), "kubectl", args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

// applyFixture applies testdata/<file> into ns with kubectl, naming the cluster and setting
// the TerraformCluster's sleep.
func applyFixture(sb target, ns, file, cluster string, sleepSeconds int) {
	GinkgoHelper()
	applyFixtureEdited(sb, ns, file, cluster, sleepSeconds, nil)
}

// applyFixtureEdited is applyFixture with the document changed by edit (when not nil) before
// it is applied.
func applyFixtureEdited(sb target, ns, file, cluster string, sleepSeconds int, edit func(string) string) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	Expect(err).NotTo(HaveOccurred())
	doc := strings.ReplaceAll(string(raw), "CLUSTER", cluster)
	doc = strings.ReplaceAll(doc, "sleep_seconds: SLEEP", "sleep_seconds: "+strconv.Itoa(sleepSeconds))
	if edit != nil {
		doc = edit(doc)
	}
	f := filepath.Join(GinkgoT().TempDir(), file)
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}

func createNamespace(sb target, ns string) {
	GinkgoHelper()
	Expect(sb.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
}

// readyCondition returns an object's Ready condition (nil when it has none or is gone).
func readyCondition(sb target, o client.Object) *metav1.Condition {
	if err := sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return nil
	}
	return meta.FindStatusCondition(terraformStatus(o).Conditions, infrav1.ReadyCondition)
}

func terraformStatus(o client.Object) *infrav1.TerraformStatus {
	GinkgoHelper()
	t, ok := o.(interface {
		GetTerraformStatus() *infrav1.TerraformStatus
	})
	Expect(ok).To(BeTrue(), "not a CAPTF object: %T", o)
	return t.GetTerraformStatus()
}

// eventuallyReady waits until every object is Ready.
func eventuallyReady(sb target, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Eventually(func(g Gomega) {
			c := readyCondition(sb, o)
			g.Expect(c).NotTo(BeNil(), "%T %s has no Ready condition yet", o, o.GetName())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%T %s: %s: %s", o, o.GetName(), c.Reason, c.Message)
		}).Should(Succeed())
	}
}

func tc(ns, name string) *infrav1.TerraformCluster {
	return &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func tm(ns, name string) *infrav1.TerraformMachine {
	return &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// jobsOf lists the Jobs of a CAPTF object on the API server, optionally of one operation.
func jobsOf(sb target, kind, ns, name string, op infrav1.Operation) []batchv1.Job {
	GinkgoHelper()
	sel := client.MatchingLabels{infrav1.OwnerKindLabel: kind, infrav1.OwnerNameLabel: naming.LabelValue(name)}
	if op != "" {
		sel[infrav1.OperationLabel] = string(op)
	}
	var list batchv1.JobList
	Expect(sb.Client().List(ctx, &list, client.InNamespace(ns), sel)).To(Succeed())
	return list.Items
}

// runsOf returns what the executor ran for an object, optionally of one operation.
func runsOf(runs []executor.Run, kind, ns, name string, op infrav1.Operation) []executor.Run {
	var out []executor.Run
	for _, r := range runs {
		if r.Namespace == ns && r.OwnerKind == kind && r.OwnerName == naming.LabelValue(name) && (op == "" || r.Operation == string(op)) {
			out = append(out, r)
		}
	}
	return out
}

// readHistory reads a sandbox's run history file.
func readHistory(path string) []executor.Run {
	GinkgoHelper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	var runs []executor.Run
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var r executor.Run
		Expect(json.Unmarshal([]byte(line), &r)).To(Succeed())
		runs = append(runs, r)
	}
	return runs
}

// eventuallyRunning waits until the executor runs the container of an operation of an object
// (its Pod is Running), and returns the Job.
func eventuallyRunning(sb target, kind, ns, name string, op infrav1.Operation) *batchv1.Job {
	GinkgoHelper()
	var job *batchv1.Job
	Eventually(func(g Gomega) {
		var running []batchv1.Job
		for _, j := range jobsOf(sb, kind, ns, name, op) {
			var pods corev1.PodList
			g.Expect(sb.Client().List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: j.Name})).To(Succeed())
			if len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning {
				running = append(running, j)
			}
		}
		// Job names end in the run sequence, so a list sorted by name does not put the newest
		// last (-10 sorts before -9): the Job is the one whose pod runs, and I1 says there is one.
		g.Expect(running).To(HaveLen(1), "one %s Job whose pod runs", op)
		job = &running[0]
	}).Should(Succeed())
	return job
}

// eventuallyNew waits for a Job of an operation that was not among before, and returns it. It
// does not wait for its pod to run: a fast Job (a restore copies one Secret) can start and end
// between two polls, so a test that needs the Job's outcome waits for it with eventuallyFinished.
func eventuallyNew(sb target, kind, ns, name string, op infrav1.Operation, before []batchv1.Job) *batchv1.Job {
	GinkgoHelper()
	seen := map[types.UID]bool{}
	for _, j := range before {
		seen[j.UID] = true
	}
	var job *batchv1.Job
	Eventually(func(g Gomega) {
		var fresh []batchv1.Job
		for _, j := range jobsOf(sb, kind, ns, name, op) {
			if !seen[j.UID] {
				fresh = append(fresh, j)
			}
		}
		g.Expect(fresh).To(HaveLen(1), "one new %s Job", op)
		job = &fresh[0]
	}).Should(Succeed())
	return job
}

// eventuallyFinished waits until a Job has a Complete or Failed condition.
func eventuallyFinished(sb target, job *batchv1.Job) *batchv1.Job {
	GinkgoHelper()
	j := &batchv1.Job{}
	Eventually(func(g Gomega) {
		g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(job), j)).To(Succeed())
		done := false
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				done = true
			}
		}
		g.Expect(done).To(BeTrue(), "job %s has not finished", j.Name)
	}).Should(Succeed())
	return j
}

// captfLeases lists CAPTF's run and cluster Leases in a namespace.
func captfLeases(sb target, ns string) []coordinationv1.Lease {
	GinkgoHelper()
	var list coordinationv1.LeaseList
	Expect(sb.Client().List(ctx, &list, client.InNamespace(ns), client.HasLabels{infrav1.LeaseLabel})).To(Succeed())
	return list.Items
}

// stateOf reads and decodes an object's Terraform state Secret; nil when there is none.
func stateOf(sb target, kind, ns, name string) *tfState {
	GinkgoHelper()
	s := &corev1.Secret{}
	err := sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(naming.StateSuffix(ns, kind, name))}, s)
	if client.IgnoreNotFound(err) == nil && err != nil {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	zr, err := gzip.NewReader(bytes.NewReader(s.Data["tfstate"]))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	st := &tfState{Labels: s.Labels}
	Expect(json.Unmarshal(raw, st)).To(Succeed())
	return st
}

// tfState is what the tests read of a Terraform state.
type tfState struct {
	Lineage string `json:"lineage"`
	Serial  int64  `json:"serial"`
	// TerraformVersion is the version of the binary that wrote the state (OpenTofu writes its
	// own version here too).
	TerraformVersion string `json:"terraform_version"`
	Resources        []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
	// Outputs are the root module's outputs as the state records them.
	Outputs map[string]struct {
		Value any `json:"value"`
	} `json:"outputs"`
	Labels map[string]string `json:"-"`
}

// processesUnder lists the live processes whose command line mentions dir.
func processesUnder(dir string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		if s := strings.ReplaceAll(string(cmdline), "\x00", " "); strings.Contains(s, dir) {
			out = append(out, e.Name()+": "+s)
		}
	}
	return out
}

// since formats a duration for the report.
func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// watchInvariants starts the chaos monitor (test/monitor) on sb for namespace ns, which must not
// exist yet, and returns the check: it replays everything recorded in ns and fails the spec on
// any violation of I1-I5 or I7, counting a run until its Job ended and its pods stopped.
// The fence objects the check writes carry no owner, so the running manager starts nothing
// for them (an ownerless object waits for its Cluster).
func watchInvariants(sb target, ns string) func() {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", sb.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	m, err := monitor.Start(ctx, cfg, nil, func(n string) bool { return n == ns })
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(m.Stop)
	return func() {
		GinkgoHelper()
		res, err := m.Check(ctx, map[string]bool{ns: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Violations).To(BeEmpty(), "invariants broken in %s", ns)
		Expect(res.Jobs).To(BeNumerically(">", 0), "the monitor saw the namespace's Jobs")
		AddReportEntry("monitor: Jobs seen in "+ns+" by operation, no violation", res.ByOp)
	}
}
