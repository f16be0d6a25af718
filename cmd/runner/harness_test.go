package main

// The harness the integration suite and the benchmark share: the two terraform binaries, a
// control plane, objects prepared as the controller prepares them, and processes of the
// runner (the test binary itself) in its run and channel modes.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// Environment variables naming the two binaries by absolute path (the Makefile exports them).
const (
	envTestTerraform = "CAPTF_TEST_TERRAFORM"
	envTestTofu      = "CAPTF_TEST_TOFU"
)

// binaries are the two binaries every terraform-facing spec runs with, in this order.
var binaries = []string{"tofu", "terraform"}

// tfBinary is a resolved binary and the first line of its version.
type tfBinary struct {
	name, path, version string
}

// findBinaries resolves both binaries: $CAPTF_TEST_TOFU, else <repo>/bin/tofu; and
// $CAPTF_TEST_TERRAFORM, else terraform on PATH. A missing one is an error naming the make
// target that provides it, never a reason to skip.
func findBinaries() (map[string]tfBinary, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	want := map[string]string{"tofu": os.Getenv(envTestTofu), "terraform": os.Getenv(envTestTerraform)}
	if want["tofu"] == "" {
		want["tofu"] = filepath.Join(root, "bin", "tofu")
	}
	if want["terraform"] == "" {
		if p, err := exec.LookPath("terraform"); err == nil {
			want["terraform"] = p
		}
	}
	out := map[string]tfBinary{}
	var errs []error
	for _, name := range binaries {
		p := want[name]
		if p == "" || !isExecutable(p) {
			errs = append(errs, fmt.Errorf("%s not found (%q; set $%s): run 'make test-runtime-bins', which builds bin/tofu and finds or builds terraform; the runner's tests run with both binaries",
				name, p, map[string]string{"tofu": envTestTofu, "terraform": envTestTerraform}[name]))
			continue
		}
		v, err := exec.Command(p, "version").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s version: %w", p, err))
			continue
		}
		out[name] = tfBinary{name: name, path: p, version: strings.SplitN(strings.TrimSpace(string(v)), "\n", 2)[0]}
	}
	return out, errors.Join(errs...)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// harness is a control plane with what the runner's two modes need.
type harness struct {
	env *envtest.Env
	k8s client.Client
	cs  *kubernetes.Clientset
	dir string
	// caFile is the API server's CA (the channel's projected ca.crt).
	caFile string
	// userKubeconfig authenticates as a user bound, per namespace (grantBackend), to what
	// Terraform's kubernetes backend needs: the runner's mode without a channel, and a person
	// running `terraform state pull`.
	userKubeconfig string
	host, port     string
	// runnerBin, when set, is a runner binary built from ./cmd/runner that processes run
	// instead of the test binary (the benchmark: the test binary's start-up is far heavier).
	runnerBin string
}

const backendUser = "captf-backend-user"

// newHarness builds the harness on a control plane test/envtest started (the suite's, or the
// benchmarks' shared one), with c its administrator client. cleanup removes what it wrote; the
// control plane's owner stops the control plane.
func newHarness(env *envtest.Env, c client.Client) (*harness, error) {
	h := &harness{env: env, k8s: c}
	var err error
	if h.cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		return nil, err
	}
	if h.dir, err = os.MkdirTemp("", "runner-it-"); err != nil {
		return nil, err
	}
	fail := func(err error) (*harness, error) { h.cleanup(); return nil, err }
	h.caFile = filepath.Join(h.dir, "ca.crt")
	if err := os.WriteFile(h.caFile, env.Config.CAData, 0o600); err != nil {
		return fail(err)
	}
	user, err := env.AddUser(ctrlenvtest.User{Name: backendUser}, nil)
	if err != nil {
		return fail(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fail(err)
	}
	h.userKubeconfig = filepath.Join(h.dir, "kubeconfig")
	if err := os.WriteFile(h.userKubeconfig, kc, 0o600); err != nil {
		return fail(err)
	}
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		return fail(err)
	}
	h.host, h.port = u.Hostname(), u.Port()
	return h, nil
}

// cleanup removes the harness's files.
func (h *harness) cleanup() { _ = os.RemoveAll(h.dir) }

// namespace creates a namespace where the backend user has what Terraform's kubernetes backend
// needs, and nothing cluster-wide.
func (h *harness) namespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(h.k8s.Create(ctx, ns)).To(Succeed())
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "kubernetes-backend"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}}
	Expect(h.k8s.Create(ctx, role)).To(Succeed())
	Expect(h.k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "kubernetes-backend"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: backendUser}},
	})).To(Succeed())
	return ns.Name
}

// moduleMain is a sample module: terraform_data only, so no provider is downloaded.
const moduleMain = `
variable "name" {
  type = string
}

variable "secret_word" {
  type      = string
  sensitive = true
}

variable "slow" {
  type    = bool
  default = false
}

variable "slow_seconds" {
  type    = number
  default = 300
}

resource "terraform_data" "greeting" {
  input = "hello ${var.name}"
}

resource "terraform_data" "slow" {
  count = var.slow ? 1 : 0
  provisioner "local-exec" {
    command = "sleep ${var.slow_seconds}"
  }
}

output "greeting" {
  value = terraform_data.greeting.output
}

output "secret_length" {
  value     = length(var.secret_word)
  sensitive = true
}

# A TerraformMachine's health output (docs/module-contract.md): healthy while the name is alpha.
output "health" {
  value = { healthy = var.name == "alpha", message = "the name is ${var.name}" }
}
`

// writeConfigMapModule lays the module out the way the kubelet mounts a ConfigMap: each key a
// symlink through ..data into a timestamped folder.
func writeConfigMapModule(dir, module string) {
	ts := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	Expect(os.MkdirAll(ts, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(ts, "main.tf"), []byte(module), 0o644)).To(Succeed())
	Expect(os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data"))).To(Succeed())
	Expect(os.Symlink(filepath.Join("..data", "main.tf"), filepath.Join(dir, "main.tf"))).To(Succeed())
}

const secretWord = "correct-horse-battery-staple"

// hostileEnv would move the state, skip the lock or reach another backend if any of it reached
// the backend or terraform (a module's kubernetes provider may use KUBE_*).
var hostileEnv = []string{
	"KUBE_HOST=https://127.0.0.1:9", "KUBE_TOKEN=not-a-token", "KUBE_CTX=elsewhere", "KUBE_PROXY_URL=http://127.0.0.1:9",
	"KUBE_NAMESPACE=elsewhere", "KUBE_INSECURE=true", "KUBE_CONFIG_PATHS=/nonexistent",
	"TF_WORKSPACE=prod", "TF_CLI_ARGS_apply=-lock=false", "TF_CLI_ARGS_plan=-lock=false",
	"TF_HTTP_ADDRESS=http://127.0.0.1:9/elsewhere", "TF_HTTP_LOCK_ADDRESS=http://127.0.0.1:9/elsewhere",
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stateObject is one reconciled object's state, prepared as the controller prepares it: the
// runner ServiceAccount bound to jobs.RunnerPolicyRules, and (prepare) the empty state Secret,
// the unheld lock Lease and the run lease.
type stateObject struct {
	h                  *harness
	ctx                context.Context
	bin                tfBinary
	namespace, name    string
	uid, suffix        string
	moduleDir, workDir string
	seq                int64
	out                io.Writer
	tokenFile          string
}

func (h *harness) newObject(ctx context.Context, bin tfBinary, ns, name, dir string, out io.Writer) *stateObject {
	return h.newObjectWithModule(ctx, bin, ns, name, dir, out, moduleMain)
}

// newObjectWithModule is newObject with another module (main.tf).
func (h *harness) newObjectWithModule(ctx context.Context, bin tfBinary, ns, name, dir string, out io.Writer, module string) *stateObject {
	o := &stateObject{h: h, ctx: ctx, bin: bin, namespace: ns, name: name, uid: string(uuid.NewUUID()),
		suffix: naming.StateSuffix(ns, "TerraformCluster", name), workDir: dir, out: out}
	o.moduleDir = filepath.Join(dir, "module")
	writeConfigMapModule(o.moduleDir, module)
	sa := naming.RunnerServiceAccountName(o.suffix)
	Expect(h.k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
	Expect(h.k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: jobs.RunnerPolicyRules(o.suffix)})).To(Succeed())
	Expect(h.k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}})).To(Succeed())
	tr, err := h.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	o.tokenFile = filepath.Join(dir, "token")
	Expect(os.WriteFile(o.tokenFile, []byte(tr.Status.Token), 0o600)).To(Succeed())
	return o
}

// prepare creates what the controller creates before an object's first Job: the state Secret
// without a tfstate key, the lock Lease without a holder (both only when missing: an object
// applied before the channel has them already), the empty plan Secret and its run lease.
func (o *stateObject) prepare() {
	k := o.h.k8s
	err := k.Create(o.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: naming.StateSecretName(o.suffix),
		Labels: runnerapi.StateLabels(o.suffix)}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	err = k.Create(o.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: naming.PlanSecretName(o.suffix)}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	err = k.Create(o.ctx, objects.Lease(o.namespace, naming.StateLockLeaseName(o.suffix)).Labels(runnerapi.StateLabels(o.suffix)).Obj())
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	err = k.Create(o.ctx, objects.Lease(o.namespace, naming.RunLeaseName(o.suffix)).Obj())
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// setRunLease names holder in the run lease, as the controller does before it creates a Job.
func (o *stateObject) setRunLease(holder string) {
	l := &coordinationv1.Lease{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.RunLeaseName(o.suffix)}, l)).To(Succeed())
	l.Spec.HolderIdentity = ptr.To(holder)
	Expect(o.h.k8s.Update(o.ctx, l)).To(Succeed())
}

// inputs writes a per-run inputs folder.
func (o *stateObject) inputs(vars map[string]any, restore []byte) string {
	dir, err := os.MkdirTemp(o.workDir, "inputs-")
	Expect(err).NotTo(HaveOccurred())
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, name), b, 0o600)).To(Succeed())
	}
	all := map[string]any{"secret_word": secretWord}
	for k, v := range vars {
		all[k] = v
	}
	write(runnerapi.KeyVariables, all)
	write(runnerapi.KeyBackend, runnerapi.Backend{Namespace: o.namespace, SecretSuffix: o.suffix})
	write(runnerapi.KeyRedact, []string{secretWord})
	if restore != nil {
		Expect(os.WriteFile(filepath.Join(dir, runnerapi.KeyRestoreState), restore, 0o600)).To(Succeed())
	}
	return dir
}

// proc is one process of the test binary acting as the runner.
type proc struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	cancel context.CancelFunc
}

func (h *harness) startProc(ctx context.Context, args, env []string, out io.Writer) *proc {
	bin := h.runnerBin
	if bin == "" {
		self, err := os.Executable()
		Expect(err).NotTo(HaveOccurred())
		bin = self
		env = append([]string{"CAPTF_RUNNER_MAIN=1"}, env...)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Env = env
	buf := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(buf, out), io.MultiWriter(buf, out)
	// A process group of its own, so a test can kill the runner and its terraform at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(cmd.Start()).To(Succeed())
	return &proc{cmd: cmd, stdout: buf, cancel: cancel}
}

// exitCode waits for the process and returns its exit code.
func (p *proc) exitCode() int {
	defer p.cancel()
	err := p.cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		Expect(err).NotTo(HaveOccurred(), "process did not run")
	}
	return p.cmd.ProcessState.ExitCode()
}

// killGroups SIGKILLs the process and everything it started (the runner's terraform runs in a
// process group of its own, its provisioners in terraform's): no grace, as a node loss or an
// OOM kill leaves them.
func (p *proc) killGroups() {
	pids := []int{p.cmd.Process.Pid}
	for i := 0; i < len(pids); i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pids[i], pids[i]))
		for _, f := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		if pgid, err := syscall.Getpgid(pid); err == nil {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = p.exitCode()
}

// runnerRun is a runner process and where its result goes.
type runnerRun struct {
	*proc
	result string
}

// startRunner starts `runner run`; channelDir empty: the kubernetes backend through the
// backend user's kubeconfig, else the channel there.
func (o *stateObject) startRunner(op string, vars map[string]any, restore []byte, channelDir string, lockTimeout time.Duration) *runnerRun {
	return o.startRunnerOf(op, vars, jobOpts{restore: restore, lockTimeout: lockTimeout}, channelDir)
}

// jobOpts are the optional parts of a run.
type jobOpts struct {
	// restore is the state a restore pushes.
	restore []byte
	// lockTimeout is terraform's -lock-timeout (default 10 s).
	lockTimeout time.Duration
	// planID makes an Apply (or a Refresh) apply that saved plan.
	planID string
	// refreshOnly makes a Plan a refresh-only plan (runner and channel).
	refreshOnly bool
	// target is the run's targeted operation (runner; and a Plan Job's channel, which records it).
	target string
	// stateLineage is the lineage the controller read: the channel serves only that state.
	stateLineage string
	// env is added to the runner's environment, as spec.job.cliConfig adds to the main
	// container's (TF_CLI_CONFIG_FILE, TF_TOKEN_<host>).
	env []string
}

// inputsHash stands for the controller's inputs hash: it changes with the variables.
func inputsHash(vars map[string]any) string {
	b, err := json.Marshal(vars)
	Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// startRunnerOf starts `runner run` with opts.
func (o *stateObject) startRunnerOf(op string, vars map[string]any, opts jobOpts, channelDir string) *runnerRun {
	restore, lockTimeout := opts.restore, opts.lockTimeout
	if lockTimeout == 0 {
		lockTimeout = 10 * time.Second
	}
	inputs := o.inputs(vars, restore)
	work, err := os.MkdirTemp(o.workDir, "work-")
	Expect(err).NotTo(HaveOccurred())
	result := filepath.Join(work, "result.json")
	args := runnerapi.Command("", runnerapi.Invocation{
		Operation: op, ModuleDir: o.moduleDir, InputsDir: inputs, WorkDir: filepath.Join(work, "w"), ResultFile: result,
		LockTimeout: lockTimeout, Binary: o.bin.path, ChannelDir: channelDir, PlanID: opts.planID, RefreshOnly: opts.refreshOnly,
		Target: opts.target,
	})[1:]
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + work}, hostileEnv...)
	env = append(env, opts.env...)
	if channelDir == "" {
		env = append(env, runnerapi.EnvKubeConfigPath+"="+o.h.userKubeconfig)
	}
	return &runnerRun{proc: o.h.startProc(o.ctx, args, env, o.out), result: result}
}

// wait waits for the runner and returns its result, exit code and raw result document.
func (r *runnerRun) wait() (runnerapi.Result, int, string) {
	code := r.exitCode()
	raw, err := os.ReadFile(r.result)
	Expect(err).NotTo(HaveOccurred(), r.stdout.String())
	Expect(len(raw)).To(BeNumerically("<=", runnerapi.MaxResultBytes))
	res, err := runnerapi.ParseResult(raw)
	Expect(err).NotTo(HaveOccurred(), string(raw))
	Expect(r.stdout.String()).NotTo(ContainSubstring(secretWord))
	return res, code, string(raw)
}

// jobRun is one Job of the object through the state channel: its Job object (controlled by
// the object, as the controller creates it), its channel and its runner.
type jobRun struct {
	o        *stateObject
	job, pod string
	dir      string
	channel  *proc
	runner   *runnerRun
}

// nextJob creates the object's next Job (the API object only: envtest runs no Job controller)
// and names it in the run lease.
func (o *stateObject) nextJob() (job, pod string) {
	o.seq++
	job = naming.JobName(o.suffix, o.seq)
	owner := objects.Cluster(o.namespace, o.name).UID(types.UID(o.uid)).Obj()
	Expect(o.h.k8s.Create(o.ctx, objects.Job(o.namespace, job).Of(infrav1.TerraformClusterKind, o.name, "").Owner(owner).Obj())).To(Succeed())
	o.setRunLease(job)
	return job, job + "-p0d5x"
}

// startChannel starts `runner channel` for a Job of the object, as the sidecar runs it.
func (o *stateObject) startChannel(job, pod, dir string) *proc {
	return o.startChannelOf(job, pod, dir, runnerapi.ChannelInvocation{})
}

// startChannelOf is startChannel with the Job's operation, inputs hash, plan ID, state lineage,
// refresh-only and target from inv.
func (o *stateObject) startChannelOf(job, pod, dir string, inv runnerapi.ChannelInvocation) *proc {
	args := runnerapi.ChannelCommand("", runnerapi.ChannelInvocation{
		Dir: dir, Namespace: o.namespace, Suffix: o.suffix, Job: job, RunLease: naming.RunLeaseName(o.suffix),
		OwnerKind: "TerraformCluster", OwnerName: o.name, OwnerUID: o.uid, TokenFile: o.tokenFile, CAFile: o.h.caFile,
		Operation: inv.Operation, InputsHash: inv.InputsHash, PlanID: inv.PlanID, StateLineage: inv.StateLineage, RefreshOnly: inv.RefreshOnly,
		Target: inv.Target,
	})[1:]
	env := []string{runnerapi.EnvServiceHost + "=" + o.h.host, runnerapi.EnvServicePort + "=" + o.h.port,
		runnerapi.EnvChannelPodName + "=" + pod, runnerapi.EnvChannelPodNamespace + "=" + o.namespace}
	return o.h.startProc(o.ctx, args, env, o.out)
}

// startJob runs an operation as the object's next Job: channel first, then the runner.
func (o *stateObject) startJob(op string, vars map[string]any, lockTimeout time.Duration) *jobRun {
	return o.startRestoreJob(op, vars, nil, lockTimeout)
}

// startRestoreJob is startJob with a state to restore (restore only).
func (o *stateObject) startRestoreJob(op string, vars map[string]any, restore []byte, lockTimeout time.Duration) *jobRun {
	return o.startJobOf(op, vars, jobOpts{restore: restore, lockTimeout: lockTimeout})
}

// startJobOf runs an operation as the object's next Job, as jobs.Build shapes it: the channel
// knows the Job's operation, its inputs hash, the plan it may hand out, whether the plan it
// stores is refresh-only, and (a Plan Job) the target its plan carries out.
func (o *stateObject) startJobOf(op string, vars map[string]any, opts jobOpts) *jobRun {
	job, pod := o.nextJob()
	dir, err := os.MkdirTemp(o.workDir, "channel-")
	Expect(err).NotTo(HaveOccurred())
	j := &jobRun{o: o, job: job, pod: pod, dir: dir}
	channelTarget := ""
	if op == runnerapi.OperationPlan {
		channelTarget = opts.target
	}
	j.channel = o.startChannelOf(job, pod, dir, runnerapi.ChannelInvocation{Operation: op, InputsHash: inputsHash(vars), PlanID: opts.planID,
		StateLineage: opts.stateLineage, RefreshOnly: opts.refreshOnly, Target: channelTarget})
	j.runner = o.startRunnerOf(op, vars, opts, dir)
	return j
}

// wait waits for the runner, then stops the channel (as the kubelet stops a sidecar after the
// main container) and checks it stopped cleanly.
func (j *jobRun) wait() (runnerapi.Result, int, string) {
	res, code, raw := j.runner.wait()
	Expect(j.channel.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	Expect(j.channel.exitCode()).To(Equal(runnerapi.ExitOK), j.channel.stdout.String())
	return res, code, raw
}

func (o *stateObject) runJob(op string, vars map[string]any) (runnerapi.Result, int, string) {
	return o.startJob(op, vars, 10*time.Second).wait()
}

// tfState is the part of a state file the tests read.
type tfState struct {
	Lineage   string `json:"lineage"`
	Serial    int    `json:"serial"`
	Resources []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"resources"`
	Outputs map[string]struct {
		Value any `json:"value"`
	} `json:"outputs"`
}

// readState reads the state Secret (key tfstate, gzip'd JSON) as the controller does.
func (o *stateObject) readState() (tfState, []byte) {
	sec := &corev1.Secret{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.StateSecretName(o.suffix)}, sec)).To(Succeed())
	zr, err := gzip.NewReader(bytes.NewReader(sec.Data[runnerapi.StateKey]))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	var s tfState
	Expect(json.Unmarshal(raw, &s)).To(Succeed())
	return s, raw
}

// putStateData replaces the state Secret's state key (nil removes it), as a person with
// kubectl would, leaving everything else of the Secret as it is.
func (o *stateObject) putStateData(raw []byte) {
	sec := &corev1.Secret{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.StateSecretName(o.suffix)}, sec)).To(Succeed())
	if raw == nil {
		delete(sec.Data, runnerapi.StateKey)
	} else {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, err := zw.Write(raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(zw.Close()).To(Succeed())
		sec.Data[runnerapi.StateKey] = b.Bytes()
	}
	Expect(o.h.k8s.Update(o.ctx, sec)).To(Succeed())
}

func (o *stateObject) lockLease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.StateLockLeaseName(o.suffix)}, l)).To(Succeed())
	return l
}

// statePull runs `<binary> state pull` with Terraform's kubernetes backend, as a person with the
// backend user's kubeconfig would, and returns the state.
func (o *stateObject) statePull() tfState {
	dir, err := os.MkdirTemp(o.workDir, "pull-")
	Expect(err).NotTo(HaveOccurred())
	main := fmt.Sprintf(`terraform {
  backend "kubernetes" {
    secret_suffix = %q
    namespace     = %q
    config_path   = %q
  }
}
`, o.suffix, o.namespace, o.h.userKubeconfig)
	Expect(os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644)).To(Succeed())
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"}
	run := func(args ...string) []byte {
		cmd := exec.CommandContext(o.ctx, o.bin.path, args...)
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), "%s %v: %s", o.bin.name, args, stderr.String())
		return out
	}
	run("init", "-input=false", "-no-color")
	var s tfState
	Expect(json.Unmarshal(run("state", "pull"), &s)).To(Succeed())
	return s
}

func stepNames(r runnerapi.Result) []string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name)
	}
	return out
}
