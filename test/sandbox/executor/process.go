package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// process is one run of a container: its first process in a session of its own, standing for
// every process the container starts.
type process struct {
	name    string
	cmd     *exec.Cmd
	started metav1.Time
	// done is closed once the first process ended, whatever it left in its session was
	// killed, and its output was copied.
	done   chan struct{}
	termed atomic.Bool
	killed atomic.Bool
}

// startProcess starts one run of container c: its command with every path into one of its
// mounts rewritten to the volume's folder, its environment (env, envFrom, the executor's own),
// its own working folder and home.
func (w *worker) startProcess(ctx context.Context, c *corev1.Container, env []string, out *lineWriter) (*process, error) {
	argv, err := w.command(c)
	if err != nil {
		return nil, err
	}
	cenv, err := w.processEnv(ctx, c, env)
	if err != nil {
		return nil, err
	}
	workDir := filepath.Join(w.containerDir(c), "root")
	if w.image != nil && w.isMain(c) {
		// An image module's container works in the image's working directory, which a Job
		// keeps by setting no workingDir: --module-dir is relative to it.
		workDir = w.image.workingDir
		if w.image.program != "" {
			cenv = append(cenv, "PATH="+filepath.Dir(w.image.program)+string(os.PathListSeparator)+hostPath(),
				runnerapi.EnvBinary+"="+w.image.program)
		}
	}
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("create working folder: %w", err)
	}
	run, err := w.containerLog(c.Name, true).newRun()
	if err != nil {
		return nil, err
	}
	// A pipe the process writes to directly: Wait returns when the process ends, even while
	// a leftover child still holds the pipe open.
	pr, pw, err := os.Pipe()
	if err != nil {
		run.end()
		return nil, fmt.Errorf("create output pipe: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = cenv
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = proc.SessionAttrs()
	copied := make(chan struct{})
	go func() { defer close(copied); out.copyFrom(pr, run) }()
	startErr := proc.Start(cmd)
	_ = pw.Close()
	if startErr != nil {
		_ = pr.Close()
		<-copied
		return nil, fmt.Errorf("start %s: %w", argv[0], startErr)
	}
	log.FromContext(ctx).V(1).Info("container started", "container", c.Name, "pid", cmd.Process.Pid, "command", argv)
	p := &process{name: c.Name, cmd: cmd, started: metav1.Now(), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		// The container is over when its first process is: nothing it started may outlive it.
		if err := proc.KillSession(cmd.Process.Pid); err != nil {
			log.FromContext(ctx).Error(err, "kill what the container left behind", "container", c.Name)
		}
		<-copied
		_ = pr.Close()
		close(p.done)
	}()
	return p, nil
}

// processEnv is a container's environment: the service variables a kubelet sets, the
// container's env and envFrom (paths into its mounts rewritten), then the executor's own
// variables, which win. Never nil: a nil environment would hand the host's own to the process.
func (w *worker) processEnv(ctx context.Context, c *corev1.Container, env []string) ([]string, error) {
	cenv, err := w.containerEnv(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(cenv)+len(env)+4)
	out = append(out, w.e.serviceEnv()...)
	out = append(out, cenv...)
	out = append(out, env...)
	out = append(out, "HOME="+filepath.Join(w.containerDir(c), "home"))
	if err := os.MkdirAll(filepath.Join(w.containerDir(c), "home"), 0o700); err != nil {
		return nil, fmt.Errorf("create home: %w", err)
	}
	return out, nil
}

// term sends SIGTERM to the first process, once.
func (p *process) term() {
	if !p.termed.Swap(true) {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// kill sends SIGKILL to every process of the container.
func (p *process) kill(ctx context.Context) {
	p.killed.Store(true)
	if err := proc.KillSession(p.cmd.Process.Pid); err != nil {
		log.FromContext(ctx).Error(err, "kill container", "container", p.name)
	}
}

// result is the exit code (128+signal when a signal ended the process) and the reason of an
// ended process: Killed (SIGKILL after the grace), Terminated (it ended after SIGTERM),
// Completed or Error.
func (p *process) result() (int32, string) {
	st := p.cmd.ProcessState
	code := int32(st.ExitCode())
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	}
	switch {
	case p.killed.Load():
		return code, "Killed"
	case p.termed.Load():
		return code, "Terminated"
	case code == 0:
		return code, "Completed"
	}
	return code, "Error"
}

// terminatedStatus is the status of an init container whose run ended.
func terminatedStatus(c *corev1.Container, exit int32, reason string, started metav1.Time, restarts int32, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptrTo(false), RestartCount: restarts,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exit, Reason: reason, StartedAt: started, FinishedAt: metav1.Now()}}}
	if last != nil {
		st.LastTerminationState = corev1.ContainerState{Terminated: last}
	}
	return st
}
