//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// helperEnv, set in a test Job's containers, makes this test binary (the sandbox's "runner")
// play a container: "install <dest>" copies itself, "work <dir>" starts a child in a process
// group of its own (as terraform does), records both pids in <dir> and prints lines until
// SIGTERM; "stubborn <dir>" does the same and ignores SIGTERM.
const helperEnv = "SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" && len(os.Args) > 2 {
		os.Exit(helper(os.Args[1], os.Args[2]))
	}
	os.Exit(m.Run())
}

func helper(part, arg string) int {
	switch part {
	case "install":
		self, err := os.Executable()
		if err != nil {
			return 1
		}
		b, err := os.ReadFile(self)
		if err != nil || os.WriteFile(arg, b, 0o755) != nil {
			return 1
		}
		return 0
	case "work", "stubborn":
		if part == "stubborn" {
			signal.Ignore(syscall.SIGTERM) // only a SIGKILL ends it, as a stuck terraform
		}
		child := exec.Command("sleep", "300")
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := child.Start(); err != nil {
			return 1
		}
		for i := 0; i < 20; i++ {
			fmt.Println("container output line", i)
		}
		pids := fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)
		if err := os.WriteFile(filepath.Join(arg, "pids.tmp"), []byte(pids), 0o600); err != nil {
			return 1
		}
		if err := os.Rename(filepath.Join(arg, "pids.tmp"), filepath.Join(arg, "pids")); err != nil {
			return 1
		}
		for {
			fmt.Println("container still working")
			time.Sleep(200 * time.Millisecond) // a container that keeps writing to the console
		}
	}
	return 2
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binaries builds the sandbox and the manager from this checkout, once per test binary.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		repo, err := testenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		built, buildErr = os.MkdirTemp("", "sandbox-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", built+string(os.PathSeparator), "./cmd/sandbox", "./cmd/manager")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the sandbox and the manager: %w: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// running is a sandbox binary started by a test.
type running struct {
	cmd        *exec.Cmd
	stderr     *syncBuffer
	work       string
	kubeconfig string
	// beforeReady is the console (stdout) up to and with the ready line.
	beforeReady *syncBuffer
	exited      chan error
	client      client.Client
}

// startSandbox starts the sandbox binary with stdout into the given pipe's write end and waits
// for its ready line, which it reads from the read end.
func startSandbox(t *testing.T, stdoutR *os.File, stdoutW *os.File, args ...string) (*running, *bufio.Scanner) {
	t.Helper()
	g := NewWithT(t)
	bin := binaries(t)
	repo, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	self, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	r := &running{work: filepath.Join(dir, "work"), kubeconfig: filepath.Join(dir, "kubeconfig"), exited: make(chan error, 1),
		beforeReady: &syncBuffer{}}
	r.cmd = exec.Command(filepath.Join(bin, "sandbox"), "--kubeconfig="+r.kubeconfig, "--work-dir="+r.work,
		"--bin-dir="+filepath.Join(repo, "bin"), "--repo="+repo, "--manager-binary="+filepath.Join(bin, "manager"),
		"--runner-binary="+self, "--terraform="+self)
	r.cmd.Args = append(r.cmd.Args, args...)
	r.stderr = &syncBuffer{}
	r.cmd.Stdout, r.cmd.Stderr = stdoutW, r.stderr
	g.Expect(r.cmd.Start()).To(Succeed())
	_ = stdoutW.Close()
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			if err := <-r.exited; err != nil {
				t.Logf("sandbox killed at cleanup: %v", err)
			}
		}
	})
	sc := bufio.NewScanner(stdoutR)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	ready := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			_, _ = r.beforeReady.Write([]byte(sc.Text() + "\n"))
			if strings.HasPrefix(sc.Text(), ReadyLine) {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		g.Expect(ok).To(BeTrue(), "the sandbox's output ended before its ready line")
	case err := <-r.exited:
		t.Fatalf("the sandbox exited before it was ready: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("the sandbox was not ready within 3 minutes")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := sandbox.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	r.client, err = client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return r, sc
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runWorkingJob creates a Job whose container works until it is killed, and returns the pids
// of its first process and of the child it started in a process group of its own.
func (r *running) runWorkingJob(t *testing.T, ns, part string) []int {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(r.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(r.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner"}})).To(Succeed())
	managed := map[string]string{infrav1.ManagedLabel: "true"}
	marker := corev1.EnvVar{Name: helperEnv, Value: "1"}
	job := objects.Job(ns, "work").Label(infrav1.ManagedLabel, "true").With(func(j *batchv1.Job) {
		j.Spec.Template = corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: managed},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "runner", AutomountServiceAccountToken: ptr.To(false),
				InitContainers: []corev1.Container{{Name: "install", Image: "test", Command: runnerapi.InstallCommand(), Env: []corev1.EnvVar{marker},
					VolumeMounts: []corev1.VolumeMount{{Name: "bin", MountPath: runnerapi.BinDir}}}},
				Containers: []corev1.Container{{Name: "work", Image: "test", Command: []string{runnerapi.RunnerPath, part, "/state"}, Env: []corev1.EnvVar{marker},
					VolumeMounts: []corev1.VolumeMount{{Name: "bin", MountPath: runnerapi.BinDir}, {Name: "state", MountPath: "/state"}}}},
				Volumes: []corev1.Volume{
					{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		}
	}).Obj()
	g.Expect(r.client.Create(ctx, job)).To(Succeed())
	var pids []int
	g.Eventually(func() error {
		files, _ := filepath.Glob(filepath.Join(r.work, "pods", ns, "work-*", "volumes", "state-*", "pids"))
		if len(files) != 1 {
			return fmt.Errorf("%d pid files", len(files))
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			return err
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil {
				return err
			}
			pids = append(pids, p)
		}
		return nil
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return pids
}

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid int
	start     string
	cmdline   string
}

func readProc(pid int) (proc, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return proc{pid: pid, ppid: ppid, start: f[19], cmdline: strings.ReplaceAll(string(cmd), "\x00", " ")}, true
}

func allProcs() []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if p, ok := readProc(pid); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// descendants lists every live process under root (by parent pid), with its start time.
func descendants(root int) []proc {
	all := allProcs()
	under := map[int]bool{root: true}
	var out []proc
	for changed := true; changed; {
		changed = false
		for _, p := range all {
			if under[p.ppid] && !under[p.pid] {
				under[p.pid] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// survivors lists which of the recorded processes still run (the same process: same start
// time), and every process whose command line names the sandbox's work folder.
func survivors(recorded []proc, work string) []string {
	var out []string
	for _, p := range recorded {
		if now, ok := readProc(p.pid); ok && now.start == p.start {
			out = append(out, fmt.Sprintf("%d %s", p.pid, now.cmdline))
		}
	}
	for _, p := range allProcs() {
		if strings.Contains(p.cmdline, work) {
			out = append(out, fmt.Sprintf("%d %s", p.pid, p.cmdline))
		}
	}
	return out
}

// recordAll snapshots the sandbox's descendants and the container's processes, and checks the
// snapshot holds what must die with the sandbox.
func recordAll(t *testing.T, r *running, container []int) []proc {
	t.Helper()
	g := NewWithT(t)
	recorded := descendants(r.cmd.Process.Pid)
	names := map[string]bool{}
	for _, p := range recorded {
		names[filepath.Base(strings.Fields(p.cmdline + " x")[0])] = true
	}
	g.Expect(names).To(HaveKey("etcd"))
	g.Expect(names).To(HaveKey("kube-apiserver"))
	g.Expect(names).To(HaveKey("manager"))
	for _, pid := range container {
		p, ok := readProc(pid)
		g.Expect(ok).To(BeTrue(), "container process %d runs", pid)
		recorded = append(recorded, p)
	}
	var etcd *proc
	for i := range recorded {
		if strings.Contains(recorded[i].cmdline, "etcd") && strings.Contains(recorded[i].cmdline, "--data-dir="+r.work) {
			etcd = &recorded[i]
		}
	}
	g.Expect(etcd).NotTo(BeNil(), "etcd's data lives in the sandbox's work folder, which names it")
	return recorded
}

// A sandbox killed with SIGKILL leaves nothing: not etcd, kube-apiserver or the manager, not
// the container's first process, not the child it started in a process group of its own.
func TestASandboxKilledWithSIGKILLLeavesNoProcess(t *testing.T) {
	g := NewWithT(t)
	pr, pw, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = pr.Close() }()
	r, out := startSandbox(t, pr, pw)
	var console syncBuffer
	go func() {
		for out.Scan() {
			_, _ = console.Write([]byte(out.Text() + "\n"))
		}
	}()
	container := r.runWorkingJob(t, "killed", "stubborn")
	recorded := recordAll(t, r, container)

	// The console shows the Job's output; the sandbox's own controllers keep quiet without --verbose.
	g.Eventually(console.String).Should(ContainSubstring("[killed/work] container output line 19"))
	// The manager's info lines (its start-up) go to its log file, which the banner names, and
	// not to the console.
	managerLog := filepath.Join(filepath.Dir(r.kubeconfig), "sandbox-manager.log")
	g.Expect(console.String()).To(ContainSubstring("The manager's log (its warnings and errors also show here): " + managerLog))
	logged, err := os.ReadFile(managerLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logged)).To(ContainSubstring("Registering webhook"))
	g.Expect(r.beforeReady.String()+console.String()).NotTo(ContainSubstring("Registering webhook"), "the manager's info lines stay off the console")
	g.Expect(r.stderr.String()).To(ContainSubstring("manager ready"), "the sandbox's own progress lines show")
	g.Expect(r.stderr.String()).NotTo(ContainSubstring("sandbox.local"), "the executor's and the workload controller's lines are debug lines")

	g.Expect(r.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Expect(<-r.exited).To(HaveOccurred())
	g.Eventually(func() []string { return survivors(recorded, r.work) }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
		Should(BeEmpty(), func() string {
			return "processes of the killed sandbox survive it; the sandbox's stderr (its guard's lines too):\n" + r.stderr.String()
		})
	g.Eventually(func() bool { _, err := os.Stat(r.kubeconfig); return os.IsNotExist(err) }).WithTimeout(10*time.Second).Should(BeTrue(),
		"the guard removes the kubeconfig of a killed sandbox")
}

// With its console gone (`make run | tee log`, and Ctrl-C ends tee first), the sandbox keeps
// going, and Ctrl-C still stops it cleanly: exit 0, nothing left, the kubeconfig removed.
func TestASandboxWhoseConsoleWentAwayStopsCleanlyOnCtrlC(t *testing.T) {
	g := NewWithT(t)
	pr, pw, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	r, _ := startSandbox(t, pr, pw, "--verbose")
	g.Expect(pr.Close()).To(Succeed(), "the console goes away")

	container := r.runWorkingJob(t, "piped", "work")
	recorded := recordAll(t, r, container)
	// The container writes a line every 200 ms, which the sandbox copies to its stdout, the
	// closed pipe: a sandbox that died of SIGPIPE would have exited by now.
	g.Consistently(r.exited).WithTimeout(2*time.Second).ShouldNot(Receive(), "the sandbox died writing to its closed console")

	g.Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	var exitErr error
	g.Eventually(r.exited).WithTimeout(2 * time.Minute).Should(Receive(&exitErr))
	g.Expect(exitErr).NotTo(HaveOccurred(), "a clean exit after Ctrl-C")
	g.Expect(r.stderr.String()).To(ContainSubstring("sandbox.local"), "--verbose shows what the executor and the workload controller do")
	g.Expect(survivors(recorded, r.work)).To(BeEmpty(), "nothing of the sandbox is left once it returned")
	_, err = os.Stat(r.kubeconfig)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the kubeconfig is removed")
}
