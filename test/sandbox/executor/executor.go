package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultNodeName is the node the executor's Pods are bound to.
const DefaultNodeName = "captf-sandbox"

// DefaultShutdownGrace is how long running containers get after SIGTERM when the executor stops.
const DefaultShutdownGrace = 30 * time.Second

// Options configure an Executor.
type Options struct {
	// RunnerBinary stands in for the runner inside the manager image (runnerapi.RunnerInImage):
	// the init container copies it into the Job, and the main container runs that copy.
	RunnerBinary string
	// TerraformBinary is the terraform or tofu binary the runner runs (CAPTF_TF_BINARY).
	TerraformBinary string
	// WorkDir holds one private folder per Pod (volumes, termination message, logs).
	WorkDir string
	// NodeName is the node Pods are bound to. Default DefaultNodeName.
	NodeName string
	// Output receives every container's output, each line prefixed with the Pod's namespace
	// and Job. Nil discards it (each Pod's folder keeps a log file either way).
	Output io.Writer
	// HistoryFile, when set, gets one JSON line (a Run) per finished Pod.
	HistoryFile string
	// ShutdownGrace is how long running containers get after SIGTERM when the executor
	// stops. Default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// HeartbeatInterval is how often the node's Lease is renewed. Default
	// DefaultHeartbeatInterval, a kubelet's default.
	HeartbeatInterval time.Duration
	// ImagePrograms maps the name of a program an image module's image holds ("tofu",
	// "terraform") to the host program the runner runs in its place (CAPTF_TF_BINARY). An
	// image holding none of them runs TerraformBinary.
	ImagePrograms map[string]string
	// ImagePullBackOff is the wait after a failed image pull, doubling after each failure up
	// to 16 times itself. Default DefaultImagePullBackOff.
	ImagePullBackOff time.Duration
	// Kubelet, when set, makes the node serve the kubelet's container-log endpoint over HTTPS
	// on an ephemeral port of 127.0.0.1 with these certificates, and advertise it on its Node;
	// the API server must run with Kubelet.APIServerFlags(). Nil: the node serves no logs.
	Kubelet *KubeletPKI
}

// DefaultHeartbeatInterval is a kubelet's node Lease renewal interval.
const DefaultHeartbeatInterval = 10 * time.Second

// Run is the record of one Pod the executor ran.
type Run struct {
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	Pod       string `json:"pod"`
	// Operation, OwnerKind and OwnerName come from the Job's CAPTF labels.
	Operation string    `json:"operation"`
	OwnerKind string    `json:"ownerKind"`
	OwnerName string    `json:"ownerName"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	// ExitCode of the main container (128+signal when a signal ended it; -1 when it never ran).
	ExitCode int32 `json:"exitCode"`
	// Phase is Succeeded or Failed.
	Phase corev1.PodPhase `json:"phase"`
	// Reason says why a container stopped early: Terminated (SIGTERM by a deletion or the
	// deadline), Killed (SIGKILL after the grace), or what the executor could not provide.
	Reason string `json:"reason,omitempty"`
}

// Executor runs CAPTF's Jobs as local processes.
type Executor struct {
	opts      Options
	client    client.Client
	apiReader client.Reader
	clientset kubernetes.Interface
	restCfg   *rest.Config
	history   io.Writer

	// recordDelay (a time.Duration) holds back each run's record; a test sets it to show
	// that the record still lands before the Pod's end is reported.
	recordDelay atomic.Int64

	// kubeletVersion is what the node reports: the API server's version.
	kubeletVersion string

	mu      sync.Mutex
	workers map[string]*worker
	runs    []Run
	// paused stops the node's heartbeat (PauseHeartbeat); wasPaused remembers a pause until
	// the heartbeat saw the resume.
	paused, wasPaused bool
	// partitioned cuts the node off the API server (Partition).
	partitioned bool
	// refreshFraction of a projected token's life passes before it is replaced (0: 0.8).
	refreshFraction float64
	// workCtx outlives the manager's context so containers can stop gracefully and report
	// their final status after the manager began to stop.
	workCtx    context.Context
	workCancel context.CancelFunc
	wg         sync.WaitGroup
	// logs is the kubelet endpoint (nil: none).
	logs *logServer
}

// CacheOptions restricts the manager's cache to what the node watches, as a kubelet does: the
// Pods the scheduler bound to nodeName (empty: DefaultNodeName).
func CacheOptions(nodeName string) cache.Options {
	if nodeName == "" {
		nodeName = DefaultNodeName
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
	}}
}

// New builds an Executor; SetupWithManager starts it with a manager whose cache was built
// with CacheOptions.
func New(cfg *rest.Config, opts Options) (*Executor, error) {
	if opts.RunnerBinary == "" || opts.TerraformBinary == "" || opts.WorkDir == "" {
		return nil, errors.New("new executor: the runner binary, the terraform binary and the work folder are required")
	}
	for _, b := range []string{opts.RunnerBinary, opts.TerraformBinary} {
		if st, err := os.Stat(b); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("new executor: %s is not an executable file", b)
		}
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.ImagePullBackOff <= 0 {
		opts.ImagePullBackOff = DefaultImagePullBackOff
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("new executor: create work folder: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new executor: clientset: %w", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("new executor: server version: %w", err)
	}
	e := &Executor{opts: opts, clientset: cs, restCfg: rest.CopyConfig(cfg), workers: map[string]*worker{}, history: io.Discard, kubeletVersion: v.GitVersion}
	if opts.HistoryFile != "" {
		f, err := os.OpenFile(opts.HistoryFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("new executor: open history: %w", err)
		}
		e.history = f
	}
	if opts.Kubelet != nil {
		if e.logs, err = newLogServer(e, opts.Kubelet); err != nil {
			return nil, fmt.Errorf("new executor: %w", err)
		}
	}
	e.workCtx, e.workCancel = context.WithCancel(context.Background())
	return e, nil
}

// GracefulShutdownTimeout is what the executor's manager must allow its runnables when it
// stops: the containers' grace plus the time to report their end.
func (e *Executor) GracefulShutdownTimeout() time.Duration {
	return e.opts.ShutdownGrace + 20*time.Second
}

// SetupWithManager registers the node: its registration and heartbeat, the Pods bound to it,
// its kubelet endpoint (when Options.Kubelet is set), and the shutdown hook. The manager's cache
// must come from CacheOptions with this node's name, and its GracefulShutdownTimeout must be at
// least GracefulShutdownTimeout().
func (e *Executor) SetupWithManager(mgr manager.Manager) error {
	e.client = mgr.GetClient()
	e.apiReader = mgr.GetAPIReader()
	if err := e.setupNode(mgr); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(e.heartbeat)); err != nil {
		return fmt.Errorf("add node heartbeat: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(e.logServerRunnable)); err != nil {
		return fmt.Errorf("add kubelet endpoint: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		e.shutdown(log.FromContext(ctx))
		// Followers read their containers' logs to the end before the endpoint closes.
		e.stopLogServer(log.FromContext(ctx))
		return nil
	})); err != nil {
		return fmt.Errorf("add executor shutdown: %w", err)
	}
	return nil
}

// Runs returns the Pods run so far, in the order they finished.
func (e *Executor) Runs() []Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Run(nil), e.runs...)
}

func (e *Executor) record(r Run) {
	if d := time.Duration(e.recordDelay.Load()); d > 0 {
		time.Sleep(d) // a test widens the window between a container's end and its record
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs = append(e.runs, r)
	if b, err := json.Marshal(r); err == nil {
		_, _ = e.history.Write(append(b, '\n'))
	}
}

// shutdown stops every container: SIGTERM, then SIGKILL after ShutdownGrace.
func (e *Executor) shutdown(logger logr.Logger) {
	e.mu.Lock()
	n := 0
	for _, w := range e.workers {
		if !w.finished() {
			n++
			w.terminate(e.opts.ShutdownGrace, "executor stopping")
		}
	}
	e.mu.Unlock()
	if n > 0 {
		logger.Info("stopping running containers", "count", n, "grace", e.opts.ShutdownGrace)
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(e.opts.ShutdownGrace + 10*time.Second):
		logger.Info("containers did not report back in time")
	}
	e.workCancel()
	if c, ok := e.history.(io.Closer); ok {
		_ = c.Close()
	}
}

// serviceEnv is what a kubelet gives every container to find the API server.
func (e *Executor) serviceEnv() []string {
	if e.restCfg == nil {
		return nil
	}
	u, err := url.Parse(e.restCfg.Host)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	return []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port}
}

// podDir is the private folder of a Pod.
func (e *Executor) podDir(pod *corev1.Pod) string {
	return filepath.Join(e.opts.WorkDir, pod.Namespace, pod.Name)
}
