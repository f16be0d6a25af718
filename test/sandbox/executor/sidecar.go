package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// Restart back-off of a sidecar that ended on its own: it doubles from sidecarBackoff up to
// maxSidecarBackoff (the kubelet's is 10 s to 5 min; a sandbox wants a faster retry).
const (
	sidecarBackoff    = time.Second
	maxSidecarBackoff = 30 * time.Second
)

// isSidecar reports whether an init container is a native sidecar (restartPolicy Always).
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// sidecar is the supervisor's state for one native sidecar.
type sidecar struct {
	c     *corev1.Container
	index int

	mu       sync.Mutex
	started  chan struct{} // closed once it first started (its startup probe succeeded)
	failed   chan struct{} // closed when it cannot run at all (failure says why)
	failure  error
	stopping chan struct{} // closed when it must stop for good
	deadline time.Time     // when it is killed after stopping began
	done     chan struct{} // closed when the supervisor ended (no process of it runs)
}

func newSidecar(c *corev1.Container, index int) *sidecar {
	return &sidecar{c: c, index: index, started: make(chan struct{}), failed: make(chan struct{}),
		stopping: make(chan struct{}), done: make(chan struct{})}
}

// stop tells the supervisor to stop the sidecar for good: SIGTERM, SIGKILL at deadline.
func (s *sidecar) stop(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopping:
	default:
		s.deadline = deadline
		close(s.stopping)
	}
}

func (s *sidecar) killAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// awaitSidecarStarted waits until the sidecar started (the next init container or the main
// container may start), could not start, or the Pod is stopped.
func (w *worker) awaitSidecarStarted(sc *sidecar) error {
	for {
		stopping, _, changed := w.stop.state()
		if stopping {
			return errStopped
		}
		select {
		case <-sc.started:
			return nil
		case <-sc.failed:
			return sc.failure
		case <-changed:
		}
	}
}

// superviseSidecar runs a sidecar until it is told to stop: it starts it, waits for its startup
// probe (none: started at once), and starts it again after a back-off whenever it ends on its
// own, as restartPolicy Always asks.
func (w *worker) superviseSidecar(ctx context.Context, sc *sidecar, env []string, out *lineWriter) {
	defer close(sc.done)
	logger := log.FromContext(ctx).WithValues("container", sc.c.Name)
	backoff := sidecarBackoff
	var restarts int32
	var last *corev1.ContainerStateTerminated
	everStarted := false
	for {
		select {
		case <-sc.stopping:
			return
		default:
		}
		p, err := w.startProcess(ctx, sc.c, env, out)
		if err != nil {
			sc.mu.Lock()
			sc.failure = err
			sc.mu.Unlock()
			close(sc.failed)
			w.setInit(sc.index, terminatedStatus(sc.c, 128+9, "CreateContainerError", metav1.Now(), restarts, last))
			return
		}
		w.setSidecarRunning(ctx, sc, p, false, restarts, last)
		started, err := w.probeStarted(ctx, sc, p, env)
		if err != nil {
			sc.mu.Lock()
			sc.failure = err
			sc.mu.Unlock()
			close(sc.failed)
			p.kill(ctx)
			<-p.done
			exit, reason := p.result()
			w.setInit(sc.index, terminatedStatus(sc.c, exit, reason, p.started, restarts, last))
			return
		}
		if started {
			if !everStarted {
				everStarted = true
				close(sc.started)
			}
			w.setSidecarRunning(ctx, sc, p, true, restarts, last)
		}
		select {
		case <-p.done:
		case <-sc.stopping:
			w.stopSidecarProcess(ctx, sc, p)
			exit, reason := p.result()
			w.setInit(sc.index, terminatedStatus(sc.c, exit, reason, p.started, restarts, last))
			return
		}
		exit, reason := p.result()
		term := terminatedStatus(sc.c, exit, reason, p.started, restarts, last).State.Terminated
		last = term
		restarts++
		logger.Info("sidecar ended; restarting it after a back-off", "exitCode", exit, "reason", reason, "backoff", backoff, "restarts", restarts)
		w.setInit(sc.index, corev1.ContainerStatus{Name: sc.c.Name, Image: sc.c.Image, Started: ptrTo(false), RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off %s restarting failed container", backoff)}},
			LastTerminationState: corev1.ContainerState{Terminated: last}})
		w.reportInits(ctx)
		select {
		case <-time.After(backoff):
		case <-sc.stopping:
			return
		}
		backoff = min(2*backoff, maxSidecarBackoff)
	}
}

// stopSidecarProcess stops a sidecar's current run: SIGTERM, SIGKILL at the deadline.
func (w *worker) stopSidecarProcess(ctx context.Context, sc *sidecar, p *process) {
	p.term()
	t := time.NewTimer(time.Until(sc.killAt()))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		log.FromContext(ctx).Info("grace period over; killing the sidecar", "container", sc.c.Name)
		p.kill(ctx)
		<-p.done
	}
}

// setSidecarRunning records a sidecar's run and writes the init containers' statuses.
func (w *worker) setSidecarRunning(ctx context.Context, sc *sidecar, p *process, started bool, restarts int32, last *corev1.ContainerStateTerminated) {
	st := corev1.ContainerStatus{Name: sc.c.Name, Image: sc.c.Image, Started: ptrTo(started), Ready: started, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.started}}}
	if last != nil {
		st.LastTerminationState = corev1.ContainerState{Terminated: last}
	}
	w.setInit(sc.index, st)
	w.reportInits(ctx)
}

// reportInits writes the init containers' statuses into the Pod's status.
func (w *worker) reportInits(ctx context.Context) {
	inits := w.initStatuses()
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) { s.InitContainerStatuses = inits }); err != nil {
		log.FromContext(ctx).Error(err, "report init containers")
	}
}

// stopSidecars stops the sidecars in the reverse order of their start, each after the one
// started after it ended: SIGTERM, then SIGKILL at the deadline (the Pod's stop deadline, or
// its grace period from now when its main container ended by itself).
func (w *worker) stopSidecars(ctx context.Context, sidecars []*sidecar) {
	if len(sidecars) == 0 {
		return
	}
	stopping, deadline, _ := w.stop.state()
	if !stopping {
		deadline = time.Now().Add(gracePeriod(w.spec))
	}
	for i := len(sidecars) - 1; i >= 0; i-- {
		sc := sidecars[i]
		sc.stop(deadline)
		<-sc.done
	}
	w.reportInits(ctx)
}

// probeStarted runs a sidecar's startup probe until it succeeds (true), or the process ends,
// the sidecar must stop, or the probe failed failureThreshold times in a row (the process is
// then killed, to be started again, as a kubelet does) (false). No probe: started at once. A
// probe the sandbox cannot run is an error: the Pod fails rather than guess.
func (w *worker) probeStarted(ctx context.Context, sc *sidecar, p *process, env []string) (bool, error) {
	pr := sc.c.StartupProbe
	if pr == nil {
		return true, nil
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	if pr.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	threshold := pr.FailureThreshold
	if threshold <= 0 {
		threshold = 3
	}
	wait := time.Duration(pr.InitialDelaySeconds) * time.Second
	for failures := int32(0); ; {
		select {
		case <-time.After(wait):
		case <-p.done:
			return false, nil
		case <-sc.stopping:
			return false, nil
		}
		wait = period
		err := w.probe(ctx, sc.c, &pr.ProbeHandler, env, timeout)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, errUnsupported) {
			return false, fmt.Errorf("startup probe: %w", err)
		}
		failures++
		log.FromContext(ctx).V(1).Info("startup probe failed", "container", sc.c.Name, "failures", failures, "error", err.Error())
		if failures >= threshold {
			log.FromContext(ctx).Info("startup probe failed too often; killing the sidecar", "container", sc.c.Name, "failures", failures)
			p.kill(ctx)
			<-p.done
			return false, nil
		}
	}
}

// probe runs one probe of container c: an exec probe in the container's context (its mounts
// and environment), a TCP connection or an HTTP GET to the loopback address.
func (w *worker) probe(ctx context.Context, c *corev1.Container, h *corev1.ProbeHandler, env []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		probeC := c.DeepCopy()
		probeC.Command, probeC.Args = h.Exec.Command, nil
		argv, err := w.command(probeC)
		if err != nil {
			return err
		}
		penv, err := w.processEnv(ctx, c, env)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = penv, filepath.Join(w.containerDir(c), "root")
		cmd.SysProcAttr = proc.SessionAttrs()
		cmd.Cancel = func() error { return proc.KillSession(cmd.Process.Pid) }
		if err := proc.Start(cmd); err != nil {
			return fmt.Errorf("start probe: %w", err)
		}
		err = cmd.Wait()
		_ = proc.KillSession(cmd.Process.Pid) // nothing a probe started outlives it
		if err != nil {
			return fmt.Errorf("exec probe: %w", err)
		}
		return nil
	case h.TCPSocket != nil:
		port, err := containerPort(c, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("tcp probe: %w", err)
		}
		return conn.Close()
	case h.HTTPGet != nil:
		port, err := containerPort(c, h.HTTPGet.Port)
		if err != nil {
			return err
		}
		scheme := "http"
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: h.HTTPGet.Path}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return fmt.Errorf("http probe: %w", err)
		}
		for _, hd := range h.HTTPGet.HTTPHeaders {
			req.Header.Add(hd.Name, hd.Value)
		}
		// As the kubelet: no certificate verification for an HTTPS probe.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // what a kubelet does
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("http probe: %w", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("http probe: status %d", resp.StatusCode)
		}
		return nil
	}
	return fmt.Errorf("%w: this kind of probe", errUnsupported)
}

// containerPort resolves a probe's port: a number, or the name of one of the container's ports.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("%w: no port named %q in container %s", errUnsupported, p.StrVal, c.Name)
}
