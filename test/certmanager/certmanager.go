package certmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// Module is the Go module that holds cert-manager's controllers and CRDs.
const Module = "github.com/cert-manager/cert-manager"

// BinaryName is the program's file name in the tool cache and in bin/.
const BinaryName = "cert-manager-controllers"

// InjectCAFrom is the annotation by which cainjector fills an object's caBundle from the CA of
// a Certificate's Secret (`<namespace>/<certificate>`).
const InjectCAFrom = "cert-manager.io/inject-ca-from"

// CRDDir is the folder of cert-manager's CRDs in the module at the version go.mod pins
// (downloaded through the module proxy when it is not in the module cache yet).
func CRDDir() (string, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", Module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("download %s: %w", Module, err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("read go mod download's answer: %w", err)
	}
	dir := filepath.Join(mod.Dir, "deploy", "crds")
	if _, err := os.Stat(filepath.Join(dir, "cert-manager.io_certificates.yaml")); err != nil {
		return "", fmt.Errorf("cert-manager %s keeps no CRDs in %s: %w", mod.Version, dir, err)
	}
	return dir, nil
}

// Binary is the program's path: $BIN_DIR/cert-manager-controllers, else <repo>/bin/...
func Binary() (string, error) {
	dir := os.Getenv("BIN_DIR")
	if dir == "" {
		root, err := envtest.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	path := filepath.Join(dir, BinaryName)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found: run 'make test-bins' (or hack/build-bin.sh cert-manager) to build it: %w", path, err)
	}
	return path, nil
}

// WriteKubeconfig writes cfg, with its credentials inline, as a kubeconfig file.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["api"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["api"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "api"}
	kc.CurrentContext = "api"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Options say how to start the controllers.
type Options struct {
	// Binary is the program (required; see Binary).
	Binary string
	// Kubeconfig reaches the API server (required).
	Kubeconfig string
	// Out receives the program's log (default: discarded).
	Out io.Writer
	// Args are more flags (--cluster-resource-namespace, -v).
	Args []string
}

// Process is a running cert-manager-controllers.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts the controllers. They run until Stop, or until the calling process is gone.
func Start(o Options) (*Process, error) {
	if o.Binary == "" || o.Kubeconfig == "" {
		return nil, errors.New("cert-manager-controllers needs its binary and a kubeconfig")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	cmd := exec.Command(o.Binary, append([]string{"--kubeconfig", o.Kubeconfig}, o.Args...)...)
	cmd.Stdout, cmd.Stderr = o.Out, o.Out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Binary, err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop asks the controllers to stop (SIGTERM) and waits up to grace for them; then it kills
// the process. It fails when the process had to be killed or exited with an error.
func (p *Process) Stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.exited:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal cert-manager-controllers: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.exitError()
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("wait for cert-manager-controllers to stop; killed: %w", ctx.Err())
	case <-timer.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("cert-manager-controllers did not stop within %s of SIGTERM; killed", grace)
}

func (p *Process) exitError() error {
	if p.err != nil {
		return fmt.Errorf("cert-manager-controllers exited: %w", p.err)
	}
	return nil
}
