package capimanager

import (
	"bytes"
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

// Options configure Start. Every field but Provider, MoveWebhookPort, Output and Verbosity is
// required.
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
	// MoveWebhookPort points the webhook configurations at another port. Start calls it when the
	// manager exited because a port was taken, before it starts the manager again on that port
	// (default nil: the manager starts again on WebhookPort).
	MoveWebhookPort func(ctx context.Context, port int) error
	// Output receives the manager's log (default: discarded).
	Output io.Writer
	// Verbosity is the manager's -v (default 0: its info lines at level 0 only).
	Verbosity int
}

// Running is a started manager.
type Running struct {
	name     string
	tail     *tailBuffer
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
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		r, portTaken, err := start(ctx, opts, bin, kubeconfig)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
		// A port found free and taken by another process before the manager bound it (another
		// sandbox's, or an outgoing connection's): new ports, as a kubelet would restart the
		// container. The webhook port is one of them (it was chosen long before, when the
		// webhook configurations were installed), and they follow it. Any other early exit is
		// the error.
		if !portTaken || ctx.Err() != nil || attempt == startAttempts {
			break
		}
		if opts.MoveWebhookPort != nil {
			port, err := freePort()
			if err != nil {
				return nil, errors.Join(append(errs, err)...)
			}
			if err := opts.MoveWebhookPort(ctx, port); err != nil {
				return nil, errors.Join(append(errs, fmt.Errorf("start %s: move the webhook port: %w", name, err))...)
			}
			opts.WebhookPort = port
		}
		fmt.Fprintf(opts.Output, "[%s] exited before it was ready, a port taken (attempt %d of %d): starting it again with new ports\n", name, attempt, startAttempts)
	}
	return nil, errors.Join(errs...)
}

// startAttempts bounds how often Start starts a manager whose port was taken.
const startAttempts = 3

// start is one attempt of Start: the manager with health and diagnostics ports found free now.
// It reports too whether the manager said, anywhere in its output, that a port it binds was
// taken.
func start(ctx context.Context, opts Options, bin, kubeconfig string) (*Running, bool, error) {
	name := opts.Provider.Binary
	health, err := freePort()
	if err != nil {
		return nil, false, err
	}
	diagnostics, err := freePort()
	if err != nil {
		return nil, false, err
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
	// The tail is written through exec's own copy, which Wait waits for: once the manager
	// exited, the tail holds its last words.
	// The phrase is looked for in the whole output, not in the tail: a manager whose webhook
	// server failed to bind goes on logging while its other runnables stop.
	tail := &tailBuffer{max: 4096}
	portTaken := &phraseWatch{phrase: []byte("address already in use")}
	out := proc.Prefixed(opts.Output, "["+name+"] ")
	all := io.MultiWriter(out, tail, portTaken)
	cmd.Stdout, cmd.Stderr = all, all
	cmd.SysProcAttr = proc.SessionAttrs()
	if err := proc.Start(cmd); err != nil {
		return nil, false, fmt.Errorf("start %s: %w", name, err)
	}
	r := &Running{name: name, cmd: cmd, exited: make(chan struct{}), tail: tail}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(r.exited)
	}()
	waitCtx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := r.waitReady(waitCtx, "http://127.0.0.1:"+strconv.Itoa(health)+"/readyz"); err != nil {
		err = errors.Join(err, r.Stop())
		// Stop waited for the process and for exec's copy of its output: the watch saw it all.
		return nil, portTaken.Seen(), err
	}
	return r, false, nil
}

// phraseWatch reports whether a phrase was ever written to it, across writes that split it.
type phraseWatch struct {
	mu     sync.Mutex
	phrase []byte
	carry  []byte
	seen   bool
}

func (w *phraseWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return len(p), nil
	}
	buf := append(w.carry, p...)
	if bytes.Contains(buf, w.phrase) {
		w.seen = true
		w.carry = nil
		return len(p), nil
	}
	keep := len(w.phrase) - 1
	if len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	w.carry = append([]byte(nil), buf...)
	return len(p), nil
}

// Seen reports whether the phrase was written.
func (w *phraseWatch) Seen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// freePort finds a free port (a variable: a test takes the port it hands out first).
var freePort = proc.FreePort

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append([]byte(nil), t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// waitReady polls url until it answers 200 or the process exits.
func (r *Running) waitReady(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-r.exited:
			return fmt.Errorf("%s exited before it was ready; the end of its output (all of it with the sandbox's --verbose):\n%s", r.name, r.tail.String())
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
