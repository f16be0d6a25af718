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

// Binary is the file name of the Cluster API core manager in the binaries folder.
const Binary = "capi-manager"

// ReadyTimeout bounds how long Start waits for the manager to answer /readyz.
const ReadyTimeout = 2 * time.Minute

// FeatureGates are the Cluster API feature gates the sandbox turns on (MachinePool is on by
// default in this release).
const FeatureGates = "ClusterTopology=true"

// Options configure Start. Every field but Output and Verbosity is required.
type Options struct {
	// BinDir holds capi-manager.
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
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start runs the Cluster API core manager and waits until it is ready.
func Start(ctx context.Context, opts Options) (*Running, error) {
	if opts.BinDir == "" || opts.Config == nil || opts.WorkDir == "" || opts.CertDir == "" || opts.WebhookPort == 0 {
		return nil, errors.New("start the Cluster API manager: BinDir, Config, WorkDir, CertDir and WebhookPort are required")
	}
	bin := filepath.Join(opts.BinDir, Binary)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("start the Cluster API manager: %s not found in %s: run 'make test-bins' to build it from source: %w", Binary, opts.BinDir, err)
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("start the Cluster API manager: work folder: %w", err)
	}
	kubeconfig, _, err := proc.WriteAccess(opts.Config, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	if err := proc.EnableGuard(); err != nil {
		return nil, fmt.Errorf("start the Cluster API manager: %w", err)
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
	out := proc.Prefixed(opts.Output, "[capi-manager] ")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = proc.SessionAttrs()
	if err := proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start the Cluster API manager: %w", err)
	}
	r := &Running{cmd: cmd, exited: make(chan struct{})}
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
			return errors.New("the Cluster API manager exited before it was ready (its output says why; run the sandbox with --verbose)")
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
			return fmt.Errorf("the Cluster API manager is not ready: %w", ctx.Err())
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
				r.stopErr = fmt.Errorf("kill the Cluster API manager: %w", err)
			}
			<-r.exited
		}
	})
	return r.stopErr
}
