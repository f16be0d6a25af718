package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/capimanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/kubecontrollers"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/registry"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/workload"
)

// Options configure a sandbox. RepoRoot and BinDir are required.
type Options struct {
	// Name labels the sandbox's log lines ("sandbox" by default).
	Name string
	// RepoRoot is the repository: config/ (CRDs, RBAC, webhooks, samples) is read from it.
	RepoRoot string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
	// kustomize (or kubectl), and by default the manager and runner binaries.
	BinDir string
	// ManagerBinary and RunnerBinary default to BinDir/manager and BinDir/runner.
	ManagerBinary string
	RunnerBinary  string
	// TerraformBinary is what the runner runs. Default: FindTerraform(BinDir).
	TerraformBinary string
	// ImagePrograms maps a program an image module's image holds ("tofu", "terraform") to
	// the host program its Jobs run instead (executor.Options.ImagePrograms). Default:
	// FindImagePrograms(BinDir).
	ImagePrograms map[string]string
	// WorkDir receives everything the sandbox writes (certificates, Pods' folders, the run
	// history). Default: a new temporary folder, removed by Stop unless KeepWorkDir.
	WorkDir     string
	KeepWorkDir bool
	// KubeconfigPath is where the administrator's kubeconfig is written. Default
	// WorkDir/kubeconfig. Stop removes it.
	KubeconfigPath string
	// ManagerArgs are more flags for the manager.
	ManagerArgs []string
	// NoManager leaves the manager stopped; start it with Manager().Start.
	NoManager bool
	// ManagerOutput receives the manager's output and JobOutput the containers' output, line
	// by line with a prefix. Nil discards it.
	ManagerOutput io.Writer
	JobOutput     io.Writer
	// KubeControllersOutput receives kube-controller-manager's, kube-scheduler's and the
	// Cluster API core manager's output, line by line with a prefix. Nil discards it.
	KubeControllersOutput io.Writer
	// NodeMonitorGracePeriod is how long the node may go without a heartbeat before the node
	// lifecycle controller marks it not ready. Default: kubecontrollers'
	// (DefaultNodeMonitorGracePeriod, a cluster's default).
	NodeMonitorGracePeriod time.Duration
	// UnreachableTolerationSeconds is the toleration the API server gives every Pod for a
	// node that is not ready or unreachable: how long the Pods of a lost node stay before the
	// taint eviction controller deletes them. 0: the API server's default (300).
	UnreachableTolerationSeconds int
	// Log is the sandbox's own logger.
	Log logr.Logger
	// Verbose makes the executor and the workload clusters' controller (and controller-runtime
	// under them) log at info level. By default they log at V(1), so only their errors show.
	Verbose bool
	// StateReplicaDir, when set, runs an S3-compatible object store over this folder
	// (test/sandbox/objectstore, BinDir/versitygw) and has the manager keep its state replica
	// there (docs/state.md, "The replica"): bucket ReplicaBucket, its Secret ReplicaSecret in
	// the manager's namespace. The folder outlives the sandbox: a new sandbox given the same
	// folder finds what the earlier one's manager wrote, as a new management cluster would.
	StateReplicaDir string
}

// The state replica's bucket and Secret when Options.StateReplicaDir is set.
const (
	ReplicaBucket = "captf-states"
	ReplicaSecret = "captf-state-replica"
)

// Sandbox is a running sandbox.
type Sandbox struct {
	opts   Options
	env    *envtest.Environment
	cfg    *rest.Config
	client client.Client
	scheme *runtime.Scheme
	exec   *executor.Executor
	// kubeletPKI is how the API server and the node's kubelet endpoint trust each other.
	kubeletPKI *executor.KubeletPKI
	// registry is the sandbox's OCI registry (loopback, basic auth).
	registry *registry.Registry
	// replica is the state replica's object store (Options.StateReplicaDir), or nil.
	replica *objectstore.Server
	kube    *kubecontrollers.Running
	capi    []*capimanager.Running
	// certManager runs cert-manager's controllers, which issue the webhooks' serving
	// certificates (serving); copies copy each issued Secret into its folder until stopCopies.
	certManager    *certmanager.Process
	certManagerOut io.WriteCloser
	serving        []*ServingCertificate
	// defaultObjs is config/default as kustomize renders it (configDefault).
	defaultObjs []*unstructured.Unstructured
	copies      sync.WaitGroup
	stopCopies  context.CancelFunc
	mgrPro      *ManagerProcess
	cancel      context.CancelFunc
	done        chan error
	// WebhookPort serves the manager's admission webhooks; capiPorts the Cluster API managers'
	// (by binary).
	WebhookPort int
	capiPorts   map[string]int
	tmpWork     bool
	stopOnce    sync.Once
	stopErr     error
}

// NewScheme knows the core, CRD, Cluster API and CAPTF types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Start brings a sandbox up: control plane, CRDs, inventory, RBAC, cert-manager's controllers,
// the webhook configurations and their serving certificates (issued by cert-manager, their CA
// injected by its cainjector), the kube controllers, the Cluster API core manager, the executor and the
// workload controller, and (unless NoManager) the manager, waiting
// until it is ready to serve admission requests. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.RepoRoot == "" || opts.BinDir == "" {
		return nil, errors.New("start sandbox: RepoRoot and BinDir are required")
	}
	if opts.Name == "" {
		opts.Name = "sandbox"
	}
	if opts.ManagerOutput == nil {
		opts.ManagerOutput = io.Discard
	}
	if opts.JobOutput == nil {
		opts.JobOutput = io.Discard
	}
	if opts.ManagerBinary == "" {
		opts.ManagerBinary = filepath.Join(opts.BinDir, "manager")
	}
	if opts.RunnerBinary == "" {
		opts.RunnerBinary = filepath.Join(opts.BinDir, "runner")
	}
	if opts.TerraformBinary == "" {
		tf, err := FindTerraform(opts.BinDir)
		if err != nil {
			return nil, err
		}
		opts.TerraformBinary = tf
	}
	if opts.ImagePrograms == nil {
		opts.ImagePrograms = FindImagePrograms(opts.BinDir)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("start sandbox: %s not found in %s: run 'make test-bins' to build it from source: %w", b, opts.BinDir, err)
		}
	}
	for _, b := range []string{opts.ManagerBinary, opts.RunnerBinary} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("start sandbox: %s not found: run 'make build': %w", b, err)
		}
	}
	// Whatever this process starts from here on dies with it, even if it is killed.
	if err := proc.EnableGuard(); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	s := &Sandbox{opts: opts}
	if s.opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "captf-sandbox-")
		if err != nil {
			return nil, fmt.Errorf("start sandbox: work folder: %w", err)
		}
		s.opts.WorkDir, s.tmpWork = dir, true
		if !s.opts.KeepWorkDir {
			proc.RemoveOnExit(dir)
		}
	} else if err := os.MkdirAll(s.opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("start sandbox: work folder: %w", err)
	}
	if s.opts.KubeconfigPath == "" {
		s.opts.KubeconfigPath = filepath.Join(s.opts.WorkDir, "kubeconfig")
	}
	proc.RemoveOnExit(s.opts.KubeconfigPath)
	if err := s.start(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func (s *Sandbox) start(ctx context.Context) error {
	log := s.opts.Log
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	s.scheme = scheme
	began := time.Now()
	if err := s.startControlPlane(); err != nil {
		return err
	}
	log.Info("control plane up", "apiserver", s.cfg.Host, "took", time.Since(began).Round(time.Millisecond))
	if err := s.install(ctx); err != nil {
		return err
	}
	if err := s.startKubeControllers(ctx); err != nil {
		return err
	}
	log.Info("kube-controller-manager and kube-scheduler up", "took", time.Since(began).Round(time.Millisecond))
	if err := s.waitServingCertificates(ctx); err != nil {
		return err
	}
	log.Info("webhook serving certificates issued and their CA injected by cert-manager", "took", time.Since(began).Round(time.Millisecond))
	if err := s.startCAPIManagers(ctx); err != nil {
		return err
	}
	log.Info("Cluster API core, kubeadm bootstrap and kubeadm control plane managers up", "took", time.Since(began).Round(time.Millisecond))
	if err := s.startLocalControllers(); err != nil {
		return err
	}
	if err := s.startReplica(ctx); err != nil {
		return err
	}
	mgr, err := s.managerProcess()
	if err != nil {
		return err
	}
	s.mgrPro = mgr
	if s.opts.NoManager {
		return nil
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	log.Info("manager ready", "webhookPort", s.WebhookPort, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// startKubeControllers runs the real kube-controller-manager and kube-scheduler against the
// sandbox's API server.
func (s *Sandbox) startKubeControllers(ctx context.Context) error {
	out := s.opts.KubeControllersOutput
	if out == nil {
		out = io.Discard
	}
	kube, err := kubecontrollers.Start(ctx, kubecontrollers.Options{
		BinDir: s.opts.BinDir, Config: s.cfg, WorkDir: filepath.Join(s.controlPlaneDir(), "kube-controllers"),
		ServiceAccountKeyFile:  filepath.Join(s.env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		Output:                 out,
		NodeMonitorGracePeriod: s.opts.NodeMonitorGracePeriod,
	})
	if err != nil {
		return err
	}
	s.kube = kube
	return nil
}

// startCAPIManagers runs the real Cluster API managers against the sandbox's API server, one
// after the other: the core, and kubeadm's bootstrap and control plane providers (what a
// ClusterClass's control plane needs), each with its webhooks on its own port, served with its
// own serving certificate, issued by cert-manager.
func (s *Sandbox) startCAPIManagers(ctx context.Context) error {
	out := s.opts.KubeControllersOutput
	if out == nil {
		out = io.Discard
	}
	for _, p := range capimanager.Providers {
		r, err := capimanager.Start(ctx, capimanager.Options{
			Provider: p, BinDir: s.opts.BinDir, Config: s.cfg, WorkDir: filepath.Join(s.controlPlaneDir(), p.Binary),
			CertDir: s.capiCertDir(p), WebhookPort: s.capiPorts[p.Binary], MoveWebhookPort: s.repointCAPIWebhooks(p), Output: out,
		})
		if err != nil {
			return err
		}
		s.capi = append(s.capi, r)
	}
	return nil
}

// startLocalControllers runs the executor (the node) and the workload clusters' controller (the
// kubeconfig Secrets and the Nodes Cluster API looks for) in this process.
func (s *Sandbox) startLocalControllers() error {
	reg, err := registry.Start(context.Background())
	if err != nil {
		return err
	}
	s.registry = reg
	ex, err := executor.New(s.cfg, executor.Options{
		RunnerBinary: s.opts.RunnerBinary, TerraformBinary: s.opts.TerraformBinary,
		WorkDir: filepath.Join(s.opts.WorkDir, "pods"), Output: s.opts.JobOutput,
		HistoryFile: s.HistoryFile(), ImagePrograms: s.opts.ImagePrograms,
		Kubelet: s.kubeletPKI,
	})
	if err != nil {
		return err
	}
	s.exec = ex
	grace := ex.GracefulShutdownTimeout()
	local := s.opts.Log.WithName("local")
	if !s.opts.Verbose {
		// Debug level: their info lines (controller-runtime's start-up, reconcile IDs, the
		// executor's bookkeeping) show with --verbose only; errors always show.
		local = local.V(1)
	}
	mgr, err := manager.New(s.cfg, manager.Options{
		Scheme: s.scheme, Cache: executor.CacheOptions(ex.NodeName()), Logger: local,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		GracefulShutdownTimeout: &grace,
	})
	if err != nil {
		return fmt.Errorf("create the sandbox's own manager: %w", err)
	}
	if err := ex.SetupWithManager(mgr); err != nil {
		return err
	}
	kc, err := os.ReadFile(s.opts.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("read the administrator kubeconfig: %w", err)
	}
	if err := (&workload.Controller{Kubeconfig: kc}).SetupWithManager(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return errors.New("the sandbox's own caches did not sync")
	}
	return nil
}

// Stop stops the manager, the containers (SIGTERM, then SIGKILL after the executor's grace),
// the local controllers and the control plane, and removes the kubeconfig and, unless kept,
// the work folder. It is safe to call more than once.
func (s *Sandbox) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.mgrPro != nil {
			errs = append(errs, s.mgrPro.Stop(15*time.Second))
		}
		if s.cancel != nil {
			s.cancel()
			if err := <-s.done; err != nil {
				errs = append(errs, fmt.Errorf("sandbox controllers: %w", err))
			}
		}
		if s.registry != nil {
			errs = append(errs, s.registry.Stop())
		}
		if s.replica != nil {
			errs = append(errs, s.replica.Stop())
		}
		for i := len(s.capi) - 1; i >= 0; i-- {
			errs = append(errs, s.capi[i].Stop())
		}
		errs = append(errs, s.stopCertManager())
		if s.kube != nil {
			errs = append(errs, s.kube.Stop())
		}
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop control plane: %w", err))
			}
		}
		if err := os.Remove(s.opts.KubeconfigPath); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
		proc.KeepOnExit(s.opts.KubeconfigPath)
		if err := os.RemoveAll(s.controlPlaneDir()); err != nil {
			errs = append(errs, err)
		}
		if s.tmpWork && !s.opts.KeepWorkDir {
			if err := os.RemoveAll(s.opts.WorkDir); err != nil {
				errs = append(errs, err)
			}
			proc.KeepOnExit(s.opts.WorkDir)
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// StopGuard is the last thing a binary that started sandboxes does before it exits normally:
// it waits until the guard that kills what a killed sandbox leaves behind has checked that
// nothing is left, and has exited.
func StopGuard() { proc.StopGuard() }

// Config reaches the API server as an administrator.
func (s *Sandbox) Config() *rest.Config { return rest.CopyConfig(s.cfg) }

// Client is an administrator's client.
func (s *Sandbox) Client() client.Client { return s.client }

// Scheme knows the core, Cluster API and CAPTF types.
func (s *Sandbox) Scheme() *runtime.Scheme { return s.scheme }

// Kubeconfig is the path of the administrator's kubeconfig.
func (s *Sandbox) Kubeconfig() string { return s.opts.KubeconfigPath }

// Executor runs the Jobs.
func (s *Sandbox) Executor() *executor.Executor { return s.exec }

// Manager is the manager child process.
func (s *Sandbox) Manager() *ManagerProcess { return s.mgrPro }

// WorkDir is the sandbox's work folder.
func (s *Sandbox) WorkDir() string { return s.opts.WorkDir }

// HistoryFile has one JSON line per Pod the executor ran (executor.Run).
func (s *Sandbox) HistoryFile() string { return filepath.Join(s.opts.WorkDir, "runs.jsonl") }

// TerraformBinary is the binary the runner runs.
func (s *Sandbox) TerraformBinary() string { return s.opts.TerraformBinary }

// Replica is the state replica's object store (nil without Options.StateReplicaDir).
func (s *Sandbox) Replica() *objectstore.Server { return s.replica }

// Registry is the sandbox's OCI registry: a loopback port with basic auth, which the node pulls
// image modules from with the Pods' imagePullSecrets.
func (s *Sandbox) Registry() *registry.Registry { return s.registry }

// FindImagePrograms finds the host programs that stand for an image's tofu and terraform:
// each on PATH, else in binDir.
func FindImagePrograms(binDir string) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				out[name] = abs
				continue
			}
		}
		p := filepath.Join(binDir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			out[name] = p
		}
	}
	return out
}

// FindTerraform picks the binary Jobs run: tofu on PATH, else terraform on PATH, else
// binDir/tofu (`make runtime-bin` builds it when neither is on PATH).
func FindTerraform(binDir string) (string, error) {
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
	}
	p := filepath.Join(binDir, "tofu")
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	return "", fmt.Errorf("no terraform or tofu: none on PATH and no %s; run 'make runtime-bin'", p)
}
