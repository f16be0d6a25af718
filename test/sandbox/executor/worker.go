package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
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
	// vols maps each volume of the spec to its private folder.
	vols map[string]string

	stop   *stopper
	isDone atomic.Bool

	// statusMu guards inits, the init containers' statuses (by index in the spec; nil until
	// the container first ran), which the sidecars' supervisors update while the Pod runs.
	statusMu sync.Mutex
	inits    []*corev1.ContainerStatus

	// tokens are the projected ServiceAccount tokens the Pod's volumes hold (refreshed).
	tokens []*projectedToken

	// image is the main container's module image once pulled (nil: a module in a mount).
	image *moduleImage

	// logs holds each container's log, by name, once it first ran (the kubelet endpoint reads
	// them).
	logsMu sync.Mutex
	logs   map[string]*containerLog
}

func newWorker(e *Executor, pod *corev1.Pod) *worker {
	w := &worker{e: e, pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		spec: pod.DeepCopy(), dir: e.podDir(pod), stop: newStopper(), vols: map[string]string{},
		inits: make([]*corev1.ContainerStatus, len(pod.Spec.InitContainers)), logs: map[string]*containerLog{}}
	for _, v := range pod.Spec.Volumes {
		// A name no container can guess: a container learns where a volume is only by mounting it.
		w.vols[v.Name] = filepath.Join(w.dir, "volumes", v.Name+"-"+randomString(10))
	}
	return w
}

func (w *worker) finished() bool { return w.isDone.Load() }

// terminate asks the containers to stop: SIGTERM now (to the main containers first; sidecars
// once those ended), SIGKILL to whatever still runs after grace. A later request can only bring
// the deadline forward.
func (w *worker) terminate(grace time.Duration, reason string) { w.stop.request(grace, reason) }

func (w *worker) reason() string { return w.stop.why() }

// run prepares the Pod's folder, runs the init containers (sidecars among them) and the main
// container, stops the sidecars, and reports.
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
	inits := w.initStatuses()
	// The run is in the history before the API server hears of the Pod's end: whoever sees a
	// consequence of that end (the Job complete, a finalizer dropped, the object gone) and then
	// reads the history finds the run there.
	w.e.record(rec)
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) {
		endStatus(s, w.spec, exit, reason, message, startedAt)
		if len(inits) > 0 {
			s.InitContainerStatuses = inits
		}
	}); err != nil {
		logger.Error(err, "report the end of the pod")
	}
	logger.Info("containers ended", "exitCode", exit, "reason", reason, "phase", rec.Phase)
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
	refreshDone := make(chan struct{})
	defer close(refreshDone)
	go w.refreshTokens(ctx, refreshDone)

	if len(w.spec.Spec.Containers) != 1 {
		err := fmt.Errorf("%w: a pod with %d containers besides its sidecars (CAPTF's Jobs have one)", errUnsupported, len(w.spec.Spec.Containers))
		return -1, "CreateContainerError", err.Error(), none, err
	}
	// Sidecars run until the main container ended (or the Pod stopped): then they get SIGTERM
	// in the reverse order of their start, SIGKILL at the deadline.
	sidecars, reason, err := w.runInits(ctx, env, out)
	defer func() { w.stopSidecars(ctx, sidecars) }()
	if err != nil {
		return -1, reason, err.Error(), none, err
	}
	c := &w.spec.Spec.Containers[0]
	if w.reason() != "" {
		return -1, "Deleted", errStopped.Error(), none, errStopped
	}
	if _, ok := w.imageModuleDir(c); ok {
		img, err := w.pullModuleImage(ctx, c)
		if errors.Is(err, errStopped) {
			return -1, "Deleted", err.Error(), none, err
		}
		if err != nil {
			return -1, "CreateContainerError", err.Error(), none, err
		}
		w.image = img
	}
	p, err := w.startProcess(ctx, c, env, out)
	if err != nil {
		return -1, "CreateContainerError", err.Error(), none, err
	}
	inits := w.initStatuses()
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) { runningStatus(s, w.spec, p.started, inits) }); err != nil {
		log.FromContext(ctx).Error(err, "report the pod running")
	}
	w.await(ctx, p)
	exit, reason := p.result()
	return exit, reason, w.terminationMessage(c, exit), p.started, nil
}

// runInits runs the init containers in order: a sidecar (restartPolicy Always) is started and
// supervised, any other runs to its end. It returns the sidecars it started (to stop once the
// main container ended) and, when the Pod cannot go on, the reason of its end and the error
// whose text is the message.
func (w *worker) runInits(ctx context.Context, env []string, out *lineWriter) ([]*sidecar, string, error) {
	var sidecars []*sidecar
	for i := range w.spec.Spec.InitContainers {
		c := &w.spec.Spec.InitContainers[i]
		if w.reason() != "" {
			return sidecars, "Deleted", errStopped
		}
		if isSidecar(c) {
			sc := newSidecar(c, i)
			sidecars = append(sidecars, sc)
			go w.superviseSidecar(ctx, sc, env, out)
			if err := w.awaitSidecarStarted(sc); err != nil {
				if errors.Is(err, errStopped) {
					return sidecars, "Deleted", err
				}
				return sidecars, "InitContainerFailed", fmt.Errorf("init container %s: %w", c.Name, err)
			}
			continue
		}
		p, err := w.startProcess(ctx, c, env, out)
		if err != nil {
			w.setInit(i, terminatedStatus(c, 128+9, "CreateContainerError", metav1.Now(), 0, nil))
			return sidecars, "InitContainerFailed", fmt.Errorf("init container %s: %w", c.Name, err)
		}
		w.await(ctx, p)
		exit, reason := p.result()
		w.setInit(i, terminatedStatus(c, exit, reason, p.started, 0, nil))
		if exit != 0 {
			return sidecars, "InitContainerFailed", fmt.Errorf("init container %s exited with code %d", c.Name, exit)
		}
	}
	return sidecars, "", nil
}

// await waits until p ended, stopping it when the Pod stops: SIGTERM at once, SIGKILL to its
// whole session at the deadline.
func (w *worker) await(ctx context.Context, p *process) {
	for {
		stopping, deadline, changed := w.stop.state()
		var kill <-chan time.Time
		var timer *time.Timer
		if stopping {
			if !p.termed.Load() {
				log.FromContext(ctx).Info("stopping container", "container", p.name, "why", w.reason(), "grace", time.Until(deadline).Round(time.Second))
			}
			p.term()
			timer = time.NewTimer(time.Until(deadline))
			kill = timer.C
		}
		select {
		case <-p.done:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-changed:
			if timer != nil {
				timer.Stop()
			}
		case <-kill:
			log.FromContext(ctx).Info("grace period over; killing the container", "container", p.name)
			p.kill(ctx)
			<-p.done
			return
		}
	}
}

// setInit records the status of init container i.
func (w *worker) setInit(i int, st corev1.ContainerStatus) {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	w.inits[i] = &st
}

// initStatuses lists the statuses of the init containers that ran so far, in spec order.
func (w *worker) initStatuses() []corev1.ContainerStatus {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	var out []corev1.ContainerStatus
	for _, st := range w.inits {
		if st != nil {
			out = append(out, *st.DeepCopy())
		}
	}
	return out
}

// terminationMessage reads what the container left at its termination message path (at most
// 4096 bytes, as the kubelet keeps), or the end of its log when the policy asks for it.
func (w *worker) terminationMessage(c *corev1.Container, exit int32) string {
	b, err := os.ReadFile(w.terminationFile(c))
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

// terminationFile is where a container's termination message path leads: <pod>/termination-log
// for the main container, a file in the container's own folder for the others.
func (w *worker) terminationFile(c *corev1.Container) string {
	if w.isMain(c) {
		return filepath.Join(w.dir, "termination-log")
	}
	return filepath.Join(w.containerDir(c), "termination-log")
}

func (w *worker) isMain(c *corev1.Container) bool {
	for i := range w.spec.Spec.Containers {
		if w.spec.Spec.Containers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// containerDir is a container's own folder (its working folder and home are in it).
func (w *worker) containerDir(c *corev1.Container) string {
	return filepath.Join(w.dir, "containers", c.Name)
}

// stopper records a request to stop a Pod's containers: the first reason given, and the
// deadline after which whatever still runs is killed (a later request may only bring it
// forward). changed is closed and replaced at each change.
type stopper struct {
	mu       sync.Mutex
	reason   string
	deadline time.Time
	changed  chan struct{}
}

func newStopper() *stopper { return &stopper{changed: make(chan struct{})} }

func (s *stopper) request(grace time.Duration, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		s.reason = reason
	}
	d := time.Now().Add(grace)
	if !s.deadline.IsZero() && !d.Before(s.deadline) {
		return
	}
	s.deadline = d
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *stopper) state() (bool, time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.deadline.IsZero(), s.deadline, s.changed
}

func (s *stopper) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}
