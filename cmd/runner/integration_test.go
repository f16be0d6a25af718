package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// The test binary doubles as the runner: with CAPTF_RUNNER_MAIN=1 it runs main() instead of the
// tests, so the suite drives the real command line, signal handling and exit codes.
func TestMain(m *testing.M) {
	if os.Getenv("CAPTF_RUNNER_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestRunnerIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "runner against a real API server and a real terraform/tofu")
}

const runnerUser = "captf-runner-it"

var (
	env        *envtest.Env
	k8s        client.Client
	ctx        context.Context
	tfBinary   string
	kubeconfig string
	moduleDir  string
	namespace  string
	suffix     string
)

// findTerraform picks the binary the runner runs: $CAPTF_TF_BINARY, else bin/tofu (built by
// `make runtime-bin`), else tofu or terraform on PATH. None is a failure, never a skip.
func findTerraform() (string, error) {
	if p := os.Getenv(runnerapi.EnvBinary); p != "" {
		return exec.LookPath(p)
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	if p := filepath.Join(root, "bin", "tofu"); isExecutable(p) {
		return p, nil
	}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no terraform or tofu binary (bin/tofu, or tofu/terraform on PATH): run 'make runtime-bin'")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

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

resource "terraform_data" "greeting" {
  input = "hello ${var.name}"
}

resource "terraform_data" "slow" {
  count = var.slow ? 1 : 0
  provisioner "local-exec" {
    command = "sleep 300"
  }
}

output "greeting" {
  value = terraform_data.greeting.output
}

output "secret_length" {
  value     = length(var.secret_word)
  sensitive = true
}
`

// writeConfigMapModule lays the module out the way the kubelet mounts a ConfigMap: each key a
// symlink through ..data into a timestamped folder.
func writeConfigMapModule(dir string) {
	ts := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	Expect(os.MkdirAll(ts, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(ts, "main.tf"), []byte(moduleMain), 0o644)).To(Succeed())
	Expect(os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data"))).To(Succeed())
	Expect(os.Symlink(filepath.Join("..data", "main.tf"), filepath.Join(dir, "main.tf"))).To(Succeed())
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	var err error
	tfBinary, err = findTerraform()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(tfBinary, "version").Output()
	Expect(err).NotTo(HaveOccurred(), string(out))
	fmt.Printf("runner integration: %s (%s)\n", tfBinary, strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])

	env, err = envtest.Start(envtest.Options{})
	Expect(err).NotTo(HaveOccurred())
	fmt.Println(env.Describe())
	k8s, err = client.New(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "runner-it-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	namespace = ns.Name
	suffix = naming.StateSuffix(namespace, "TerraformCluster", "it")

	// The runner authenticates as a user with only what the kubernetes backend needs in the
	// namespace: no delete of Secrets or Leases, nothing cluster-wide.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "captf-runner"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}}
	Expect(k8s.Create(ctx, role)).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "captf-runner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: runnerUser}},
	})).To(Succeed())
	user, err := env.AddUser(ctrlenvtest.User{Name: runnerUser}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	dir, err := os.MkdirTemp("", "runner-it-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
	moduleDir = filepath.Join(dir, "module")
	writeConfigMapModule(moduleDir)
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

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

const secretWord = "correct-horse-battery-staple"

// run is one runner process.
type run struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	result string
	cancel context.CancelFunc
}

// startRunner starts the runner for an operation with fresh inputs and work folders.
func startRunner(op string, vars map[string]any, restore []byte) *run {
	dir := GinkgoT().TempDir()
	inputs, work := filepath.Join(dir, "inputs"), filepath.Join(dir, "work")
	Expect(os.MkdirAll(inputs, 0o755)).To(Succeed())
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(inputs, name), b, 0o600)).To(Succeed())
	}
	all := map[string]any{"secret_word": secretWord}
	for k, v := range vars {
		all[k] = v
	}
	write(runnerapi.KeyVariables, all)
	write(runnerapi.KeyBackend, runnerapi.Backend{Namespace: namespace, SecretSuffix: suffix})
	write(runnerapi.KeyRedact, []string{secretWord})
	if restore != nil {
		Expect(os.WriteFile(filepath.Join(inputs, runnerapi.KeyRestoreState), restore, 0o600)).To(Succeed())
	}
	self, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())
	result := filepath.Join(dir, "result.json")
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cmd := exec.CommandContext(cctx, self, runnerapi.Command("", runnerapi.Invocation{
		Operation: op, ModuleDir: moduleDir, InputsDir: inputs, WorkDir: work, ResultFile: result,
		LockTimeout: 10 * time.Second, Binary: tfBinary,
	})[1:]...)
	cmd.Env = []string{"CAPTF_RUNNER_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + dir, runnerapi.EnvKubeConfigPath + "=" + kubeconfig,
		// A hostile environment: each of these would move the state or skip the lock if it
		// reached the backend or terraform (a module's kubernetes provider may use KUBE_*).
		"KUBE_HOST=https://127.0.0.1:9", "KUBE_TOKEN=not-a-token", "KUBE_CTX=elsewhere", "KUBE_PROXY_URL=http://127.0.0.1:9",
		"KUBE_NAMESPACE=elsewhere", "KUBE_INSECURE=true", "KUBE_CONFIG_PATHS=/nonexistent",
		"TF_WORKSPACE=prod", "TF_CLI_ARGS_apply=-lock=false", "TF_CLI_ARGS_plan=-lock=false"}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(out, GinkgoWriter), io.MultiWriter(out, GinkgoWriter)
	Expect(cmd.Start()).To(Succeed())
	return &run{cmd: cmd, stdout: out, result: result, cancel: cancel}
}

// wait waits for the runner and returns its result and exit code.
func (r *run) wait() (runnerapi.Result, int, string) {
	defer r.cancel()
	err := r.cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		Fail("runner did not run: " + err.Error())
	}
	raw, err := os.ReadFile(r.result)
	Expect(err).NotTo(HaveOccurred(), r.stdout.String())
	Expect(len(raw)).To(BeNumerically("<=", runnerapi.MaxResultBytes))
	res, err := runnerapi.ParseResult(raw)
	Expect(err).NotTo(HaveOccurred(), string(raw))
	Expect(r.stdout.String()).NotTo(ContainSubstring(secretWord))
	return res, r.cmd.ProcessState.ExitCode(), string(raw)
}

func runRunner(op string, vars map[string]any, restore []byte) (runnerapi.Result, int, string) {
	return startRunner(op, vars, restore).wait()
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

// readState reads the backend's Secret (data key tfstate, gzip'd JSON), as the controller does.
func readState() (tfState, []byte) {
	sec := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateSecretName(suffix)}, sec)).To(Succeed())
	zr, err := gzip.NewReader(bytes.NewReader(sec.Data["tfstate"]))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	var s tfState
	Expect(json.Unmarshal(raw, &s)).To(Succeed())
	return s, raw
}

func lockLease() (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateLockLeaseName(suffix)}, l)
	return l, err
}

func stepNames(r runnerapi.Result) []string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name)
	}
	return out
}

var _ = Describe("the runner", Ordered, func() {
	var alphaBackup []byte

	It("applies, keeping state and outputs in the backend Secret and locking with the Lease", func() {
		res, code, raw := runRunner(runnerapi.OperationApply, map[string]any{"name": "alpha"}, nil)
		fmt.Printf("runner result (apply): %s\n", raw)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
		Expect(stepNames(res)).To(Equal([]string{"init", "apply"}))
		Expect(res.Binary).To(Equal(filepath.Base(tfBinary)))

		st, raw2 := readState()
		Expect(st.Outputs).To(HaveKeyWithValue("greeting", HaveField("Value", "hello alpha")))
		Expect(st.Outputs).To(HaveKeyWithValue("secret_length", HaveField("Value", BeNumerically("==", len(secretWord)))))
		Expect(st.Resources).To(ContainElement(HaveField("Name", "greeting")))
		alphaBackup = raw2

		lease, err := lockLease()
		Expect(err).NotTo(HaveOccurred(), "the apply took the state lock through the Lease")
		Expect(lease.Spec.HolderIdentity).To(BeNil(), "the lock was released")
	})

	It("plans and checks drift: no changes, no drift", func() {
		res, code, raw := runRunner(runnerapi.OperationPlan, map[string]any{"name": "alpha"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Changes).To(HaveValue(BeFalse()))
		res, code, raw = runRunner(runnerapi.OperationDrift, map[string]any{"name": "alpha"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Drift).To(HaveValue(BeFalse()))
		Expect(res.Changes).To(BeNil())
	})

	It("reports changes and drift without failing when the module would change things", func() {
		res, code, raw := runRunner(runnerapi.OperationPlan, map[string]any{"name": "beta"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
		Expect(res.Changes).To(HaveValue(BeTrue()))
		res, code, raw = runRunner(runnerapi.OperationDrift, map[string]any{"name": "beta"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Drift).To(HaveValue(BeTrue()))
	})

	It("restores an older backup of the same lineage over a newer state, without -force", func() {
		_, code, raw := runRunner(runnerapi.OperationApply, map[string]any{"name": "beta"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		beta, _ := readState()
		Expect(beta.Outputs["greeting"].Value).To(Equal("hello beta"))

		res, code, raw := runRunner(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, alphaBackup)
		fmt.Printf("runner result (restore): %s\n", raw)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(stepNames(res)).To(Equal([]string{"init", "state-pull", "state-push"}))
		restored, _ := readState()
		Expect(restored.Outputs["greeting"].Value).To(Equal("hello alpha"))
		Expect(restored.Lineage).To(Equal(beta.Lineage))
		Expect(restored.Serial).To(BeNumerically(">", beta.Serial))

		// The restored state matches the module with the old inputs again.
		res, code, raw = runRunner(runnerapi.OperationPlan, map[string]any{"name": "alpha"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(res.Changes).To(HaveValue(BeFalse()))
	})

	It("refuses to restore a backup of another lineage over a live state", func() {
		before, _ := readState()
		var foreign map[string]any
		Expect(json.Unmarshal(alphaBackup, &foreign)).To(Succeed())
		foreign["lineage"] = "00000000-0000-0000-0000-000000000000"
		foreign["serial"] = before.Serial + 100
		b, err := json.Marshal(foreign)
		Expect(err).NotTo(HaveOccurred())
		res, code, raw := runRunner(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, b)
		Expect(code).To(Equal(runnerapi.ExitBadInput), raw)
		Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
		Expect(res.Error).To(ContainSubstring("refusing to restore"))
		after, _ := readState()
		Expect(after.Serial).To(Equal(before.Serial))
		Expect(after.Lineage).To(Equal(before.Lineage))
	})

	It("stops an interrupted apply cleanly and releases the state lock", func() {
		r := startRunner(runnerapi.OperationApply, map[string]any{"name": "alpha", "slow": true}, nil)
		Eventually(func(g Gomega) {
			lease, err := lockLease()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil(), "the apply holds the state lock")
			g.Expect(r.stdout.String()).To(ContainSubstring("local-exec"), "the slow resource is being created")
		}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(r.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		res, code, raw := r.wait()
		fmt.Printf("runner result (interrupted apply): %s\n", raw)
		Expect(code).To(Equal(runnerapi.ExitInterrupted), raw)
		Expect(res.Outcome).To(Equal(runnerapi.OutcomeInterrupted))
		Expect(res.Error).To(ContainSubstring("interrupted by terminated during apply"))
		lease, err := lockLease()
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).To(BeNil(), "the interrupted apply released the lock")

		// Nothing is left stuck: the next run takes the lock at once.
		res, code, raw = runRunner(runnerapi.OperationRefresh, map[string]any{"name": "alpha"}, nil)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(stepNames(res)).To(Equal([]string{"init", "refresh"}))
	})

	It("destroys, leaving an empty state in the Secret", func() {
		res, code, raw := runRunner(runnerapi.OperationDestroy, map[string]any{"name": "alpha"}, nil)
		fmt.Printf("runner result (destroy): %s\n", raw)
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		Expect(stepNames(res)).To(Equal([]string{"init", "destroy"}))
		st, _ := readState()
		Expect(st.Resources).To(BeEmpty())
		Expect(st.Outputs).To(BeEmpty())
		lease, err := lockLease()
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).To(BeNil())
	})
})
