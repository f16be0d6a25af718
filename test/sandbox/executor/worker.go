package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// maxTerminationMessage is what the kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// errUnsupported marks what the sandbox cannot run; the Pod fails with the message.
var errUnsupported = errors.New("unsupported by the sandbox executor")

// errStopped means the Pod was stopped before its main container started.
var errStopped = errors.New("stopped before the container started")

// worker runs one Pod's containers, the way a kubelet would.
type worker struct {
	e   *Executor
	pod types.NamespacedName
	uid types.UID
	// spec is the Pod as it was when the worker started.
	spec *corev1.Pod
	dir  string

	stop       chan time.Duration
	mu         sync.Mutex
	stopReason string
	isDone     atomic.Bool
}

func newWorker(e *Executor, pod *corev1.Pod) *worker {
	return &worker{e: e, pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		spec: pod.DeepCopy(), dir: e.podDir(pod), stop: make(chan time.Duration, 8)}
}

func (w *worker) finished() bool { return w.isDone.Load() }

// terminate asks the containers to stop: SIGTERM now, SIGKILL after grace.
func (w *worker) terminate(grace time.Duration, reason string) {
	w.mu.Lock()
	if w.stopReason == "" {
		w.stopReason = reason
	}
	w.mu.Unlock()
	select {
	case w.stop <- grace:
	default:
	}
}

func (w *worker) reason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopReason
}

// run prepares the Pod's folder, runs the init containers and the main container, and reports.
func (w *worker) run(ctx context.Context) {
	defer w.e.wg.Done()
	defer w.isDone.Store(true)
	logger := log.FromContext(ctx).WithValues("pod", w.pod.String())
	ctx = log.IntoContext(ctx, logger)
	rec := Run{Namespace: w.pod.Namespace, Pod: w.pod.Name, Job: w.spec.Labels["job-name"],
		Operation: w.spec.Labels[infrav1.OperationLabel], OwnerKind: w.spec.Labels[infrav1.OwnerKindLabel],
		OwnerName: w.spec.Labels[infrav1.OwnerNameLabel], ExitCode: -1}
	exit, reason, message, started, err := w.runContainers(ctx)
	if err != nil {
		logger.Info("pod failed before its main container ran", "reason", reason, "message", message)
	}
	rec.Started, rec.Finished, rec.ExitCode, rec.Reason = started.Time, time.Now(), exit, reason
	rec.Phase = corev1.PodFailed
	if exit == 0 {
		rec.Phase = corev1.PodSucceeded
	}
	var startedAt *metav1.Time
	if !started.IsZero() {
		startedAt = &started
	}
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) {
		endStatus(s, w.spec, exit, reason, message, startedAt)
	}); err != nil {
		logger.Error(err, "report the end of the pod")
	}
	logger.Info("containers ended", "exitCode", exit, "reason", reason, "phase", rec.Phase)
	w.e.record(rec)
}

// runContainers returns the main container's exit code (-1: it never ran), the reason and the
// message of its end (the termination message), and when it started.
func (w *worker) runContainers(ctx context.Context) (int32, string, string, metav1.Time, error) {
	var none metav1.Time
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return -1, "CreateContainerError", err.Error(), none, err
	}
	logFile, err := os.OpenFile(filepath.Join(w.dir, logFileName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return -1, "CreateContainerError", err.Error(), none, err
	}
	defer func() { _ = logFile.Close() }()
	prefix := fmt.Sprintf("[%s/%s] ", w.pod.Namespace, w.spec.Labels["job-name"])
	out := &lineWriter{prefix: prefix, console: w.e.opts.Output, file: logFile}

	env, err := w.prepare(ctx)
	if err != nil {
		reason := "CreateContainerConfigError"
		if errors.Is(err, errStopped) {
			reason = "Deleted"
		}
		return -1, reason, err.Error(), none, err
	}

	var inits []corev1.ContainerStatus
	for i := range w.spec.Spec.InitContainers {
		c := &w.spec.Spec.InitContainers[i]
		if w.reason() != "" {
			return -1, "Deleted", errStopped.Error(), none, errStopped
		}
		start := metav1.Now()
		exit, reason, err := w.exec(ctx, c, env, out)
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptrTo(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Reason: reason, StartedAt: start, FinishedAt: metav1.Now()}}}
		inits = append(inits, st)
		if err != nil || exit != 0 {
			msg := fmt.Sprintf("init container %s exited with code %d", c.Name, exit)
			if err != nil {
				msg = fmt.Sprintf("init container %s: %v", c.Name, err)
			}
			return -1, "InitContainerFailed", msg, none, fmt.Errorf("%s", msg)
		}
	}
	if len(w.spec.Spec.Containers) != 1 {
		err := fmt.Errorf("%w: a pod with %d containers (CAPTF's Jobs have one)", errUnsupported, len(w.spec.Spec.Containers))
		return -1, "CreateContainerError", err.Error(), none, err
	}
	c := &w.spec.Spec.Containers[0]
	if w.reason() != "" {
		return -1, "Deleted", errStopped.Error(), none, errStopped
	}
	started := metav1.Now()
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) { runningStatus(s, w.spec, started, inits) }); err != nil {
		log.FromContext(ctx).Error(err, "report the pod running")
	}
	exit, reason, err := w.exec(ctx, c, env, out)
	if err != nil {
		return -1, "CreateContainerError", err.Error(), none, err
	}
	return exit, reason, w.terminationMessage(c, exit), started, nil
}

// exec runs one container as a process in its own session and waits for it, stopping it on
// request: SIGTERM to its first process, SIGKILL to the whole session after the grace. Every
// process the container left behind is killed when its first process ends.
func (w *worker) exec(ctx context.Context, c *corev1.Container, env []string, out *lineWriter) (int32, string, error) {
	argv, err := w.command(c)
	if err != nil {
		return -1, "", err
	}
	workDir := filepath.Join(w.dir, "root")
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return -1, "", fmt.Errorf("create working folder: %w", err)
	}
	cenv, err := w.containerEnv(ctx, c)
	if err != nil {
		return -1, "", err
	}
	// A pipe the process writes to directly: Wait returns when the process ends, even while
	// a leftover child still holds the pipe open.
	pr, pw, err := os.Pipe()
	if err != nil {
		return -1, "", fmt.Errorf("create output pipe: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// Never nil: a nil environment would hand the host's own to the container.
	cmd.Env = append(append(make([]string, 0, len(cenv)+len(env)), cenv...), env...)
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = proc.SessionAttrs()
	copied := make(chan struct{})
	go func() { defer close(copied); out.copyFrom(pr) }()
	startErr := cmd.Start()
	_ = pw.Close()
	if startErr != nil {
		_ = pr.Close()
		<-copied
		return -1, "", fmt.Errorf("start %s: %w", argv[0], startErr)
	}
	log.FromContext(ctx).V(1).Info("container started", "container", c.Name, "pid", cmd.Process.Pid, "command", argv)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	reason := ""
	var kill <-chan time.Time
	done := false
	for !done {
		select {
		case <-waited:
			done = true
		case grace := <-w.stop:
			if reason == "" {
				reason = "Terminated"
				log.FromContext(ctx).Info("stopping container", "container", c.Name, "why", w.reason(), "grace", grace)
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			t := time.NewTimer(grace)
			defer t.Stop()
			if kill == nil || grace == 0 {
				kill = t.C
			}
		case <-kill:
			reason = "Killed"
			log.FromContext(ctx).Info("grace period over; killing the container", "container", c.Name)
			if err := proc.KillSession(cmd.Process.Pid); err != nil {
				log.FromContext(ctx).Error(err, "kill container")
			}
			kill = nil
		}
	}
	// The container is over when its first process is: nothing it started may outlive it.
	if err := proc.KillSession(cmd.Process.Pid); err != nil {
		log.FromContext(ctx).Error(err, "kill what the container left behind")
	}
	<-copied
	_ = pr.Close()
	code := int32(cmd.ProcessState.ExitCode())
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	}
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	return code, reason, nil
}

// terminationMessage reads what the container left at its termination message path (at most
// 4096 bytes, as the kubelet keeps), or the end of its log when the policy asks for it.
func (w *worker) terminationMessage(c *corev1.Container, exit int32) string {
	b, err := os.ReadFile(w.terminationFile())
	if err == nil && len(b) > 0 {
		if len(b) > maxTerminationMessage {
			b = b[:maxTerminationMessage]
		}
		return string(b)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || exit == 0 {
		return ""
	}
	logb, err := os.ReadFile(filepath.Join(w.dir, logFileName))
	if err != nil {
		return ""
	}
	if len(logb) > 2048 {
		logb = logb[len(logb)-2048:]
	}
	return string(logb)
}

func (w *worker) terminationFile() string { return filepath.Join(w.dir, "termination-log") }

// lineWriter copies a container's output line by line to the console (with a prefix) and to
// the Pod's log file.
type lineWriter struct {
	prefix  string
	console io.Writer
	file    io.Writer
	mu      sync.Mutex
}

func (l *lineWriter) copyFrom(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		l.mu.Lock()
		_, _ = io.WriteString(l.file, line+"\n")
		_, _ = io.WriteString(l.console, l.prefix+strings.TrimRight(line, "\r")+"\n")
		l.mu.Unlock()
	}
}
