package kubecontrollers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// Controllers are the kube-controller-manager controllers the sandbox runs: what CAPTF's Jobs,
// their Pods and Secrets, its namespaces and its node meet in a cluster, and the aggregation of
// ClusterRoles into the built-in `admin`, `edit` and `view` (which carry no rules without it),
// so a tenant bound to `edit` holds what it holds in a cluster (docs/permissions.md, Tenants).
var Controllers = []string{
	"clusterrole-aggregation-controller",
	"job-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"ttl-after-finished-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"pod-garbage-collector-controller",
}

// DefaultNodeMonitorGracePeriod is kube-controller-manager's default: how long a node may go
// without a heartbeat before the node lifecycle controller marks it not ready.
const DefaultNodeMonitorGracePeriod = 50 * time.Second

// ReadyTimeout bounds how long Start waits for both processes to serve and work.
const ReadyTimeout = 2 * time.Minute

// Options configure Start. BinDir, Config, ServiceAccountKeyFile and WorkDir are required.
type Options struct {
	// BinDir holds kube-controller-manager and kube-scheduler.
	BinDir string
	// Config reaches the API server as an administrator (system:masters); both processes use
	// it for their own requests and to mint the controllers' ServiceAccount tokens.
	Config *rest.Config
	// ServiceAccountKeyFile is the private key the API server signs ServiceAccount tokens with
	// (its --service-account-signing-key-file; envtest writes it as sa-signer.key into the API
	// server's CertDir). The token controller signs legacy token Secrets with it.
	ServiceAccountKeyFile string
	// WorkDir receives the kubeconfig, the CA file and both processes' serving certificates.
	WorkDir string
	// Output receives both processes' output, each line prefixed with the process's name. Nil
	// discards it.
	Output io.Writer
	// NodeMonitorGracePeriod is kube-controller-manager's --node-monitor-grace-period.
	// Default DefaultNodeMonitorGracePeriod.
	NodeMonitorGracePeriod time.Duration
	// ExtraControllerManagerArgs are more flags for kube-controller-manager.
	ExtraControllerManagerArgs []string
}

// Running is a started pair of kube-controller-manager and kube-scheduler.
type Running struct {
	procs    []*process
	stopOnce sync.Once
	stopErr  error
}

type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	health string
}

// Start starts kube-controller-manager and kube-scheduler and waits until both serve /healthz
// and the controllers published the namespace default's ServiceAccount and CA ConfigMap.
func Start(ctx context.Context, opts Options) (*Running, error) {
	if opts.BinDir == "" || opts.Config == nil || opts.ServiceAccountKeyFile == "" || opts.WorkDir == "" {
		return nil, errors.New("start kube controllers: BinDir, Config, ServiceAccountKeyFile and WorkDir are required")
	}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("start kube controllers: %s not found in %s: run 'make test-bins' to build it from source: %w", b, opts.BinDir, err)
		}
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.NodeMonitorGracePeriod <= 0 {
		opts.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kube controllers: work folder: %w", err)
	}
	kubeconfig, caFile, err := proc.WriteAccess(opts.Config, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	if err := proc.EnableGuard(); err != nil {
		return nil, fmt.Errorf("start kube controllers: %w", err)
	}
	r := &Running{}
	kcmArgs := append([]string{
		"--controllers=" + strings.Join(Controllers, ","),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + opts.ServiceAccountKeyFile,
		"--root-ca-file=" + caFile,
		"--cluster-name=captf-sandbox",
		"--node-monitor-grace-period=" + opts.NodeMonitorGracePeriod.String(),
	}, opts.ExtraControllerManagerArgs...)
	for _, p := range []struct {
		name string
		args []string
	}{{"kube-controller-manager", kcmArgs}, {"kube-scheduler", nil}} {
		started, err := start(opts, p.name, kubeconfig, p.args)
		if err != nil {
			return nil, errors.Join(err, r.Stop())
		}
		r.procs = append(r.procs, started)
	}
	waitCtx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := r.waitReady(waitCtx, opts.Config); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

func start(opts Options, name, kubeconfig string, extra []string) (*process, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(opts.WorkDir, name)
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--leader-elect=false",
		// envtest's API server has no front-proxy (request header) CA to look up; without
		// this both processes log an error for it every few seconds.
		"--authentication-skip-lookup=true",
	}, extra...)
	cmd := exec.Command(filepath.Join(opts.BinDir, name), args...)
	out := proc.Prefixed(opts.Output, "["+name+"] ")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = proc.SessionAttrs()
	if err := proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), health: "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	return p, nil
}

// waitReady waits until both processes answer /healthz and the controllers worked once.
func (r *Running) waitReady(ctx context.Context, cfg *rest.Config) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// Each process serves a self-signed certificate it made itself; only its health is read.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // a loopback health probe
	}}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("kube controllers: client: %w", err)
	}
	for {
		ready := true
		for _, p := range r.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("%s exited before it was ready (its output says why)", p.name)
			default:
			}
			if !healthy(hc, p.health) {
				ready = false
			}
		}
		if ready && worked(ctx, c) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube controllers not ready: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func healthy(hc *http.Client, url string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// worked reports whether the ServiceAccount and root CA controllers reached namespace default
// and the aggregation controller filled the built-in ClusterRole edit.
func worked(ctx context.Context, c client.Client) bool {
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
		return false
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{}); err != nil {
		return false
	}
	var edit rbacv1.ClusterRole
	return c.Get(ctx, types.NamespacedName{Name: "edit"}, &edit) == nil && len(edit.Rules) > 0
}

// Stop ends both processes: SIGTERM, then SIGKILL after 10 s. It is safe to call more than once.
func (r *Running) Stop() error {
	r.stopOnce.Do(func() {
		var errs []error
		for _, p := range r.procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range r.procs {
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
				if err := proc.KillSession(p.cmd.Process.Pid); err != nil {
					errs = append(errs, fmt.Errorf("kill %s: %w", p.name, err))
				}
				<-p.exited
			}
		}
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}
