package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs/runnerapi"
)

// tailLines is how many lines of a failing command's stderr the result keeps (before the
// 4 KiB cap cuts more).
const tailLines = 60

// waitDelay bounds how long the runner waits for a finished command's output pipes, which a
// leftover grandchild could hold open.
const waitDelay = 30 * time.Second

// Config is one run of an operation.
type Config struct {
	Operation   string
	ModuleDir   string
	InputsDir   string
	WorkDir     string
	ResultFile  string
	LockTimeout time.Duration
	// Binary names terraform/tofu explicitly (path, or name looked up on PATH).
	Binary string
	// Environ is the runner's environment: read for CAPTF_TF_BINARY, PATH and the backend mode,
	// and passed on, adjusted, to terraform.
	Environ []string
	// Stdout receives the human log and the commands' redacted output.
	Stdout io.Writer
	// Signals delivers SIGTERM and SIGINT.
	Signals <-chan os.Signal
	// SignalChild forwards a signal to the running command (default: os.Process.Signal).
	SignalChild func(*os.Process, os.Signal) error
	// CABundle is a CA bundle offered to terraform (SSL_CERT_FILE) when the image has none of
	// its own: `runner install` puts the manager image's bundle beside the runner, so a
	// runtime image needs nothing but the binary. Empty: offer none.
	CABundle string
}

// defaultPath is searched for terraform/tofu when the image sets no PATH (minimal images).
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// systemCABundles are the files Go's crypto/x509 reads on Linux.
var systemCABundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

type session struct {
	cfg         Config
	getenv      func(string) string
	out         io.Writer
	redactor    *Redactor
	binary      string
	env         []string
	dir         string
	interrupted os.Signal
}

// Run runs the operation, writes the result to cfg.ResultFile and returns it with the exit code.
func Run(ctx context.Context, cfg Config) (runnerapi.Result, int) {
	log := logr.FromContextOrDiscard(ctx)
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.SignalChild == nil {
		cfg.SignalChild = func(p *os.Process, s os.Signal) error { return p.Signal(s) }
	}
	s := &session{cfg: cfg, getenv: envLookup(cfg.Environ), out: &syncWriter{w: cfg.Stdout}, redactor: NewRedactor(nil)}
	res := runnerapi.Result{Operation: cfg.Operation, Steps: []runnerapi.Step{}}
	code := s.execute(ctx, &res)
	doc := runnerapi.Encode(res)
	if cfg.ResultFile != "" {
		if err := os.WriteFile(cfg.ResultFile, doc, 0o644); err != nil {
			// The exit code still tells the outcome; the controller copes without a result.
			log.Error(err, "write result file", "path", cfg.ResultFile)
		}
	}
	_, _ = fmt.Fprintf(s.out, "captf-result: %s\n", doc)
	return res, code
}

// execute runs the operation and fills res; it returns the exit code.
func (s *session) execute(ctx context.Context, res *runnerapi.Result) int {
	log := logr.FromContextOrDiscard(ctx)
	fail := func(err error) int {
		res.Outcome = runnerapi.OutcomeFailed
		res.Error = s.redactor.Redact(err.Error())
		log.Info("run failed", "error", res.Error)
		var bad badInputError
		switch {
		case errors.As(err, &bad):
			return runnerapi.ExitBadInput
		case errors.Is(err, errBinaryMissing):
			return runnerapi.ExitBinaryMissing
		}
		return runnerapi.ExitInternal
	}

	cfg := s.cfg
	if !runnerapi.ValidOperation(cfg.Operation) {
		return fail(badInput("unknown operation %q (want one of %v)", cfg.Operation, runnerapi.Operations))
	}
	if cfg.LockTimeout < 0 {
		return fail(badInput("negative lock timeout %s", cfg.LockTimeout))
	}
	var err error
	dirs := map[string]*string{runnerapi.FlagModuleDir: &cfg.ModuleDir, runnerapi.FlagInputsDir: &cfg.InputsDir, runnerapi.FlagWorkDir: &cfg.WorkDir}
	for _, name := range []string{runnerapi.FlagModuleDir, runnerapi.FlagInputsDir, runnerapi.FlagWorkDir} {
		p := dirs[name]
		if *p == "" {
			return fail(badInput("--%s is required", name))
		}
		// A relative --module-dir is relative to the image's working directory.
		if *p, err = filepath.Abs(*p); err != nil {
			return fail(fmt.Errorf("resolve --%s: %w", name, err))
		}
	}

	redact, err := readRedact(cfg.InputsDir)
	if err != nil {
		return fail(err)
	}
	s.redactor = NewRedactor(redact)
	in, err := readInputs(cfg.InputsDir, cfg.Operation, redact)
	if err != nil {
		return fail(err)
	}
	pathEnv := s.getenv("PATH")
	if pathEnv == "" {
		pathEnv = defaultPath
	}
	s.binary, err = SelectBinary(cfg.Binary, s.getenv(runnerapi.EnvBinary), pathEnv)
	if err != nil {
		return fail(err)
	}
	res.Binary = filepath.Base(s.binary)
	mode := DetectBackendMode(s.getenv)
	log.Info("starting", "operation", cfg.Operation, "job", s.getenv(runnerapi.EnvJobName), "pod", s.getenv(runnerapi.EnvPodName),
		"binary", s.binary, "namespace", in.Backend.Namespace, "stateSecret", "tfstate-default-"+in.Backend.SecretSuffix,
		"inCluster", mode.InCluster, "kubeconfig", strings.Join(mode.ConfigPaths, string(os.PathListSeparator)))

	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return fail(fmt.Errorf("create work folder: %w", err))
	}
	s.dir = filepath.Join(cfg.WorkDir, "module")
	if err := CopyModule(cfg.ModuleDir, s.dir); err != nil {
		return fail(err)
	}
	if err := writeBackendOverride(s.dir, in.Backend, mode); err != nil {
		return fail(err)
	}
	s.env = ChildEnv(cfg.Environ)
	// Terraform writes temporary files (provider downloads); the image may have no writable
	// /tmp (read-only root, minimal images).
	tmp := filepath.Join(cfg.WorkDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fail(fmt.Errorf("create temp folder: %w", err))
	}
	s.env = withDefault(s.env, "TMPDIR", tmp)
	if bundle := caBundleFor(s.getenv, cfg.CABundle); bundle != "" {
		s.env = withDefault(s.env, "SSL_CERT_FILE", bundle)
	}
	pushFile := filepath.Join(cfg.WorkDir, "restore.tfstate")
	steps, err := Steps(cfg.Operation, StepOptions{VarFile: in.VarFile, LockTimeout: cfg.LockTimeout, PushFile: pushFile})
	if err != nil {
		return fail(err)
	}

	var pulled []byte
	for i, st := range steps {
		if s.pollSignal(ctx) {
			return s.interruptedBefore(res, st.Name)
		}
		if st.Name == StepStatePush {
			backup, err := os.ReadFile(in.RestoreFile)
			if err != nil {
				return fail(badInput("read %s: %w", runnerapi.KeyRestoreState, err))
			}
			push, err := planRestore(pulled, backup, in.Restore)
			if err != nil {
				return fail(err)
			}
			if err := writePrivate(pushFile, push); err != nil {
				return fail(err)
			}
		}
		rs, captured, tail, err := s.runStep(ctx, st)
		res.Steps = append(res.Steps, rs)
		if err != nil {
			return fail(err)
		}
		if s.interrupted != nil && (!s.stepOK(st, rs.ExitCode) || i < len(steps)-1) {
			res.Outcome = runnerapi.OutcomeInterrupted
			res.Error = s.redactor.Redact(fmt.Sprintf("interrupted by %s during %s; %s exited with code %d\n%s",
				s.interrupted, st.Name, res.Binary, rs.ExitCode, tail))
			return runnerapi.ExitInterrupted
		}
		if !s.stepOK(st, rs.ExitCode) {
			res.Outcome = runnerapi.OutcomeFailed
			res.Error = s.redactor.Redact(fmt.Sprintf("%s exited with code %d\n%s", st.Name, rs.ExitCode, tail))
			return runnerapi.ExitTerraformFailed
		}
		switch {
		case st.Name == StepInit:
			if err := VerifyBackend(s.dir, in.Backend); err != nil {
				return fail(err)
			}
		case st.Name == StepStatePull:
			pulled = captured
		case st.DetailedExitCode:
			changed := rs.ExitCode == 2
			if cfg.Operation == runnerapi.OperationDrift {
				res.Drift = &changed
			} else {
				res.Changes = &changed
			}
		}
	}
	res.Outcome = runnerapi.OutcomeSucceeded
	log.Info("run succeeded", "operation", cfg.Operation)
	return runnerapi.ExitOK
}

func (s *session) stepOK(st Step, code int) bool {
	return code == 0 || (st.DetailedExitCode && code == 2)
}

func (s *session) interruptedBefore(res *runnerapi.Result, step string) int {
	res.Outcome = runnerapi.OutcomeInterrupted
	res.Error = fmt.Sprintf("interrupted by %s before %s", s.interrupted, step)
	return runnerapi.ExitInterrupted
}

// pollSignal takes a pending signal without blocking; it reports whether the run is interrupted.
func (s *session) pollSignal(ctx context.Context) bool {
	select {
	case sig := <-s.cfg.Signals:
		s.onSignal(ctx, sig, nil)
	default:
	}
	return s.interrupted != nil
}

// onSignal records the first signal and forwards it to the running command. Later signals are
// not forwarded: terraform and tofu take a second interrupt as "exit immediately", which
// abandons in-flight operations and can leave the state lock held.
func (s *session) onSignal(ctx context.Context, sig os.Signal, p *os.Process) {
	log := logr.FromContextOrDiscard(ctx)
	if s.interrupted != nil {
		log.Info("signal received again; not forwarding it, terraform is already stopping (SIGKILL stops it hard)", "signal", sig.String())
		return
	}
	s.interrupted = sig
	if p == nil {
		log.Info("signal received; stopping before the next step", "signal", sig.String())
		return
	}
	if err := s.cfg.SignalChild(p, sig); err != nil {
		log.Error(err, "forward signal", "signal", sig.String(), "pid", p.Pid)
		return
	}
	log.Info("signal forwarded; waiting for terraform to stop and release the state lock", "signal", sig.String(), "pid", p.Pid)
}

// runStep runs one command, forwarding signals while it runs. It returns the step record, the
// captured stdout (Capture steps) and the redacted tail of stderr. An error means the command
// could not run at all.
func (s *session) runStep(ctx context.Context, st Step) (runnerapi.Step, []byte, string, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("step", st.Name)
	rec := runnerapi.Step{Name: st.Name, ExitCode: -1}
	cmd := exec.Command(s.binary, st.Args...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	cmd.WaitDelay = waitDelay
	isolate(cmd)
	tail := newTailBuffer(tailLines)
	stderr := newLineFilter(s.redactor, s.out, tail)
	cmd.Stderr = stderr
	var captured bytes.Buffer
	var stdout *lineFilter
	if st.Capture {
		cmd.Stdout = &captured
	} else {
		stdout = newLineFilter(s.redactor, s.out)
		cmd.Stdout = stdout
	}

	log.Info("running", "command", filepath.Base(s.binary)+" "+strings.Join(st.Args, " "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return rec, nil, "", fmt.Errorf("%w: start %s: %w", errBinaryMissing, s.binary, err)
		}
		return rec, nil, "", fmt.Errorf("start %s: %w", st.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
wait:
	for {
		select {
		case sig := <-s.cfg.Signals:
			s.onSignal(ctx, sig, cmd.Process)
		case waitErr = <-done:
			break wait
		}
	}
	rec.DurationMs = time.Since(start).Milliseconds()
	stderr.Flush()
	if stdout != nil {
		stdout.Flush()
	}
	if cmd.ProcessState != nil {
		rec.ExitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		log.Error(waitErr, "wait for command")
	}
	log.Info("finished", "exitCode", rec.ExitCode, "durationMs", rec.DurationMs)
	return rec, captured.Bytes(), tail.String(), nil
}

// ChildEnv is the environment terraform runs with: the runner's own, without the variables that
// would move the state or change the commands, and with automation settings and the default
// workspace forced. Removed: TF_WORKSPACE, TF_DATA_DIR, TF_CLI_ARGS*, and every KUBE_* but
// KUBE_CONFIG_PATH (which the override repeats as config_path). Terraform's kubernetes
// backend falls back to KUBE_HOST, KUBE_TOKEN, KUBE_CTX, KUBE_PROXY_URL, ... even when the
// override sets those settings to "", so pinning alone does not keep the state in place.
func ChildEnv(environ []string) []string {
	forced := []string{"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_WORKSPACE=default"}
	out := make([]string, 0, len(environ)+len(forced))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "TF_WORKSPACE", k == "TF_DATA_DIR", k == "TF_CLI_ARGS", strings.HasPrefix(k, "TF_CLI_ARGS_"),
			k == "TF_IN_AUTOMATION", k == "TF_INPUT", k == "CHECKPOINT_DISABLE",
			strings.HasPrefix(k, "KUBE_") && k != runnerapi.EnvKubeConfigPath:
			continue
		}
		out = append(out, kv)
	}
	return append(out, forced...)
}

// withDefault sets key=value unless the environment has key already.
func withDefault(env []string, key, value string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return env
		}
	}
	return append(env, key+"="+value)
}

// caBundleFor returns offered when terraform would otherwise find no CA certificates: neither
// SSL_CERT_FILE nor SSL_CERT_DIR is set and the image has no system bundle.
func caBundleFor(getenv func(string) string, offered string) string {
	if offered == "" || getenv("SSL_CERT_FILE") != "" || getenv("SSL_CERT_DIR") != "" {
		return ""
	}
	for _, p := range systemCABundles {
		if _, err := os.Stat(p); err == nil {
			return ""
		}
	}
	if _, err := os.Stat(offered); err != nil {
		return ""
	}
	return offered
}

func envLookup(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
