package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// ManagerReadyTimeout bounds how long Start waits for the manager's /readyz.
const ManagerReadyTimeout = 2 * time.Minute

// PlanApproverGroups is the sandbox manager's --plan-approver-groups: the group of the
// sandbox's administrator (its kubeconfig user), so `make run` users and the e2e suite can
// approve plans.
const PlanApproverGroups = "system:masters"

// OverrideGroups is the sandbox manager's --guard-override-groups: the group of the sandbox's
// administrator too, so that clusterctl move, which the e2e suite runs with that kubeconfig, may
// create the target objects with the manager's records and drop them from the source copies
// (docs/move.md). A spec that needs an administrator outside the override groups starts its
// own sandbox with ManagerArgs naming another group (ManagerArgs come last, and the last flag
// wins), and plays its users with impersonation.
const OverrideGroups = "system:masters"

// installManagerNamespace installs, as config/default renders them, the manager's Role and
// RoleBinding in its own namespace (leader election, and the plan approvers ConfigMap the
// manager writes), the plan-approval policy (the ValidatingAdmissionPolicy, its binding and its
// ConfigMap), the namespace-deletion policies with their bindings (one of each per kind) and
// the template-immutability policy with its binding.
// The manager then writes its --plan-approver-groups into that ConfigMap, as it does in a
// cluster.
func (s *Sandbox) installManagerNamespace(ctx context.Context) error {
	objs, err := s.configDefault()
	if err != nil {
		return err
	}
	n := 0
	for _, u := range objs {
		switch {
		case u.GetKind() == "Role", u.GetKind() == "RoleBinding",
			u.GetKind() == "ValidatingAdmissionPolicy", u.GetKind() == "ValidatingAdmissionPolicyBinding",
			u.GetKind() == "ConfigMap" && u.GetName() == webhooks.PlanApproversConfigMap:
		default:
			continue
		}
		if u.GetNamespace() != "" && u.GetNamespace() != ManagerNamespace {
			return fmt.Errorf("config/default renders %s %s into %s, the sandbox's manager runs in %s", u.GetKind(), u.GetName(), u.GetNamespace(), ManagerNamespace)
		}
		if err := s.ensure(ctx, u); err != nil {
			return err
		}
		n++
	}
	if n != 13 {
		return fmt.Errorf("config/default renders %d of the manager's Role, RoleBinding, plan-approval policy, binding and ConfigMap, the six namespace-deletion policies and bindings and the template-immutability policy and binding, want 13", n)
	}
	return nil
}

// ManagerProcess is the manager binary running as a child of the sandbox, with its webhooks,
// under the manager's ServiceAccount.
type ManagerProcess struct {
	binary string
	args   []string
	env    []string
	out    io.Writer
	probe  string
	// webhookPort is where the webhook configurations point; movePort points them elsewhere
	// when another process took the port.
	webhookPort int
	movePort    func(ctx context.Context, port int) error

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// starts counts how often the process was started.
	starts int
}

func (s *Sandbox) managerProcess() (*ManagerProcess, error) {
	probe, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--metrics-bind-address=0",
		"--enable-webhooks",
		"--webhook-cert-dir=" + s.certDir(),
		"--zap-encoder=console",
		// The identity the manager runs as (managerKubeconfig): the guards let its own writes
		// through, and the plan approvers ConfigMap goes into its namespace.
		"--manager-service-account=" + ManagerNamespace + "/" + ManagerServiceAccount,
		// The sandbox's kubectl user is an administrator in system:masters: it may approve
		// plans (docs/sandbox.md). ManagerArgs may name other groups.
		"--plan-approver-groups=" + PlanApproverGroups,
		// clusterctl move runs as the administrator (OverrideGroups).
		"--guard-override-groups=" + OverrideGroups,
	}
	args = append(args, s.opts.ManagerArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.installManagerNamespace(ctx); err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	env = append(env, "KUBECONFIG="+s.managerKubeconfig())
	return &ManagerProcess{binary: s.opts.ManagerBinary, args: args, env: env,
		out: proc.Prefixed(s.opts.ManagerOutput, "["+s.opts.Name+" manager] "), probe: "127.0.0.1:" + strconv.Itoa(probe),
		webhookPort: s.WebhookPort, movePort: s.repointWebhooks}, nil
}

// Start starts the manager and waits until /readyz answers 200 (its caches synced and its
// webhook server serves the certificate). The sandbox picks free ports, but on a shared machine
// another process may take one before the manager binds it: then the manager gets new ports
// (the webhook configurations follow) and starts again, up to three times.
func (m *ManagerProcess) Start(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		exited, err := m.start()
		if err != nil {
			return err
		}
		err = m.waitReady(ctx, exited)
		if err == nil || !errors.Is(err, errExitedEarly) || attempt == 3 {
			return err
		}
		moved, perr := m.replaceTakenPorts(ctx)
		if perr != nil {
			return errors.Join(err, perr)
		}
		if !moved {
			return err
		}
	}
}

var errExitedEarly = errors.New("manager exited before it was ready (its output says why)")

// replaceTakenPorts picks new ports for those another process holds now.
func (m *ManagerProcess) replaceTakenPorts(ctx context.Context) (bool, error) {
	moved := false
	if taken(m.probe) {
		p, err := proc.FreePort()
		if err != nil {
			return false, err
		}
		m.probe, moved = "127.0.0.1:"+strconv.Itoa(p), true
	}
	if taken(":" + strconv.Itoa(m.webhookPort)) {
		p, err := proc.FreePort()
		if err != nil {
			return false, err
		}
		if err := m.movePort(ctx, p); err != nil {
			return false, err
		}
		m.webhookPort, moved = p, true
	}
	return moved, nil
}

// taken reports whether a TCP address cannot be bound now.
func taken(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	_ = l.Close()
	return false
}

func (m *ManagerProcess) start() (<-chan struct{}, error) {
	m.mu.Lock()
	if m.cmd != nil {
		m.mu.Unlock()
		return nil, errors.New("start manager: already running")
	}
	args := append([]string{"--health-probe-bind-address=" + m.probe, "--webhook-port=" + strconv.Itoa(m.webhookPort)}, m.args...)
	cmd := exec.Command(m.binary, args...)
	cmd.Env = m.env
	cmd.Stdout, cmd.Stderr = m.out, m.out
	cmd.SysProcAttr = proc.SessionAttrs()
	if err := proc.Start(cmd); err != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("start manager: %w", err)
	}
	exited := make(chan struct{})
	m.cmd, m.exited = cmd, exited
	m.starts++
	m.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		m.mu.Lock()
		if m.cmd == cmd {
			m.cmd = nil
		}
		m.mu.Unlock()
		close(exited)
	}()
	return exited, nil
}

func (m *ManagerProcess) waitReady(ctx context.Context, exited <-chan struct{}) error {
	deadline := time.Now().Add(ManagerReadyTimeout)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get("http://" + m.probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errExitedEarly
		case <-ctx.Done():
			return fmt.Errorf("wait for the manager: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manager not ready after %s", ManagerReadyTimeout)
		}
	}
}

// Running reports whether the manager process runs.
func (m *ManagerProcess) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// Starts is how often the manager was started.
func (m *ManagerProcess) Starts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts
}

// Kill ends the manager with SIGKILL, as a crash or an OOM kill would, and waits until it
// is gone.
func (m *ManagerProcess) Kill() error {
	cmd, exited := m.current()
	if cmd == nil {
		return nil
	}
	if err := proc.KillSession(cmd.Process.Pid); err != nil {
		return fmt.Errorf("kill manager: %w", err)
	}
	<-exited
	return nil
}

// Stop ends the manager with SIGTERM and waits; after grace it kills it.
func (m *ManagerProcess) Stop(grace time.Duration) error {
	cmd, exited := m.current()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	return m.Kill()
}

func (m *ManagerProcess) current() (*exec.Cmd, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd, m.exited
}
