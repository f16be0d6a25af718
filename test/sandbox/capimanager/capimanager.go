package capimanager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// Provider is one of the Cluster API managers the sandbox runs: the core manager, and the
// kubeadm bootstrap and control plane managers a ClusterClass's control plane needs. The names
// are the ones clusterctl init gives them.
type Provider struct {
	// Name is the provider's name in clusterctl's inventory and the label its CRDs carry.
	Name string
	// Type is the inventory's provider type.
	Type string
	// Namespace is where clusterctl init installs it (and its inventory entry lives).
	Namespace string
	// Binary is the manager's file name in the binaries folder.
	Binary string
	// ConfigDir is the folder of its config (crd/bases, webhook/manifests.yaml) in the
	// cluster-api module.
	ConfigDir string
	// Group is the API group of the CRDs it owns (the core owns every other group of the module).
	Group string
	// WebhookConfigurationPrefix names its webhook configurations, <prefix>-validating- and
	// <prefix>-mutating-webhook-configuration.
	WebhookConfigurationPrefix string
}

// The three managers, in the order the sandbox starts them.
var (
	Core = Provider{Name: "cluster-api", Type: "CoreProvider", Namespace: "capi-system", Binary: "capi-manager",
		ConfigDir: "core/config", Group: "cluster.x-k8s.io", WebhookConfigurationPrefix: "capi"}
	KubeadmBootstrap = Provider{Name: "bootstrap-kubeadm", Type: "BootstrapProvider", Namespace: "capi-kubeadm-bootstrap-system",
		Binary: "capi-kubeadm-bootstrap", ConfigDir: "bootstrap/kubeadm/config", Group: "bootstrap.cluster.x-k8s.io",
		WebhookConfigurationPrefix: "capi-kubeadm-bootstrap"}
	KubeadmControlPlane = Provider{Name: "control-plane-kubeadm", Type: "ControlPlaneProvider", Namespace: "capi-kubeadm-control-plane-system",
		Binary: "capi-kubeadm-control-plane", ConfigDir: "controlplane/kubeadm/config", Group: "controlplane.cluster.x-k8s.io",
		WebhookConfigurationPrefix: "capi-kubeadm-control-plane"}
	Providers = []Provider{Core, KubeadmBootstrap, KubeadmControlPlane}
)

// ReadyTimeout bounds how long Start waits for the manager to answer /readyz.
const ReadyTimeout = 2 * time.Minute

// FeatureGates are the Cluster API feature gates the sandbox turns on, in every manager (MachinePool
// is on by default in this release).
const FeatureGates = "ClusterTopology=true"

// Options configure Start. Every field but Provider, Output and Verbosity is required.
type Options struct {
	// Provider is the manager to run (default: Core).
	Provider Provider
	// BinDir holds the manager's binary.
	BinDir string
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// WorkDir receives the manager's kubeconfig.
	WorkDir string
	// CertDir holds tls.crt and tls.key, a serving certificate for 127.0.0.1, for the webhook
	// server.
	CertDir string
	// WebhookPort is where the webhook configurations point.
	WebhookPort int
	// Output receives the manager's log (default: discarded).
	Output io.Writer
	// Verbosity is the manager's -v (default 0: its info lines at level 0 only).
	Verbosity int
}

// Running is a started manager.
type Running struct {
	name     string
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start runs a Cluster API manager and waits until it is ready.
func Start(ctx context.Context, opts Options) (*Running, error) {
	if opts.Provider.Binary == "" {
		opts.Provider = Core
	}
	name := opts.Provider.Binary
	if opts.BinDir == "" || opts.Config == nil || opts.WorkDir == "" || opts.CertDir == "" || opts.WebhookPort == 0 {
		return nil, fmt.Errorf("start %s: BinDir, Config, WorkDir, CertDir and WebhookPort are required", name)
	}
	bin := filepath.Join(opts.BinDir, name)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("start %s: not found in %s: run 'make test-bins' to build it from source: %w", name, opts.BinDir, err)
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("start %s: work folder: %w", name, err)
	}
	kubeconfig, _, err := proc.WriteAccess(opts.Config, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	if err := proc.EnableGuard(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	health, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	diagnostics, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--leader-elect=false",
		"--feature-gates="+FeatureGates,
		"--webhook-port="+strconv.Itoa(opts.WebhookPort),
		"--webhook-cert-dir="+opts.CertDir,
		"--health-addr=127.0.0.1:"+strconv.Itoa(health),
		"--diagnostics-address=127.0.0.1:"+strconv.Itoa(diagnostics),
		"--insecure-diagnostics",
		"--v="+strconv.Itoa(opts.Verbosity),
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out := proc.Prefixed(opts.Output, "["+name+"] ")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = proc.SessionAttrs()
	if err := proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	r := &Running{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(r.exited)
	}()
	waitCtx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := r.waitReady(waitCtx, "http://127.0.0.1:"+strconv.Itoa(health)+"/readyz"); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

// waitReady polls url until it answers 200 or the process exits.
func (r *Running) waitReady(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-r.exited:
			return fmt.Errorf("%s exited before it was ready (its output says why; run the sandbox with --verbose)", r.name)
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not ready: %w", r.name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exited is closed once the process has exited.
func (r *Running) Exited() <-chan struct{} { return r.exited }

// Stop ends the manager: SIGTERM, then SIGKILL after 10 s. It is safe to call more than once.
func (r *Running) Stop() error {
	r.stopOnce.Do(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			if err := proc.KillSession(r.cmd.Process.Pid); err != nil {
				r.stopErr = fmt.Errorf("kill %s: %w", r.name, err)
			}
			<-r.exited
		}
	})
	return r.stopErr
}
