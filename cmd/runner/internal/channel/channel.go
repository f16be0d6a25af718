package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Config is one state channel: its command line (the fields are documented there; the first
// state write pins the lineage in server.writeLineage) and what it takes from its environment.
type Config struct {
	runnerapi.ChannelInvocation
	// Pod is the channel's pod ($POD_NAME), recorded on the locks it takes.
	Pod string
	// APIServer is the API server's URL; default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
	APIServer string
	// Listen is the address to listen on; default 127.0.0.1:0 (an ephemeral port: pods of the
	// sandbox share one loopback). A restarted channel first tries the port it had.
	Listen string
}

// ShutdownGrace bounds how long a stopping channel waits for requests in flight.
const ShutdownGrace = 10 * time.Second

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// A suffix ends a Secret and a Lease name and must not contain '/'.
	suffixPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

func (c Config) validate() error {
	var errs []error
	for name, v := range map[string]string{
		runnerapi.FlagDir: c.Dir, runnerapi.FlagJob: c.Job, runnerapi.FlagRunLease: c.RunLease,
		runnerapi.FlagOwnerKind: c.OwnerKind, runnerapi.FlagOwnerName: c.OwnerName, runnerapi.FlagOwnerUID: c.OwnerUID,
		runnerapi.FlagTokenFile: c.TokenFile, runnerapi.FlagCAFile: c.CAFile, "$" + runnerapi.EnvChannelPodName: c.Pod,
	} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if !dns1123Label.MatchString(c.Namespace) || len(c.Namespace) > 63 {
		errs = append(errs, fmt.Errorf("namespace %q is not a namespace name", c.Namespace))
	}
	if !suffixPattern.MatchString(c.Suffix) || len(c.Suffix) > 200 {
		errs = append(errs, fmt.Errorf("suffix %q cannot end a Secret name", c.Suffix))
	}
	if c.Operation != "" && !runnerapi.ValidOperation(c.Operation) {
		errs = append(errs, fmt.Errorf("unknown operation %q", c.Operation))
	}
	if c.Operation == runnerapi.OperationPlan && c.InputsHash == "" {
		errs = append(errs, fmt.Errorf("--%s is required for a Plan Job", runnerapi.FlagInputsHash))
	}
	errs = append(errs, c.planFlagErrors()...)
	if c.StateLineage != "" {
		if !runnerapi.ValidLineage(c.StateLineage) {
			errs = append(errs, fmt.Errorf("state lineage %q is not 1 to %d printable characters", c.StateLineage, runnerapi.MaxLineageLength))
		}
		if c.Operation == runnerapi.OperationRestore {
			errs = append(errs, fmt.Errorf("--%s is not for a Restore Job, which replaces the state", runnerapi.FlagStateLineage))
		}
	}
	return errors.Join(errs...)
}

// planFlagErrors judges the flags about saved plans: the plan ID, the kinds of plan a Plan Job
// stores, and the targeted operation its plan carries out.
func (c Config) planFlagErrors() []error {
	var errs []error
	if c.PlanID != "" {
		if !runnerapi.ValidPlanID(c.PlanID) {
			errs = append(errs, fmt.Errorf("plan ID %q is not a plan ID", c.PlanID))
		}
		if runnerapi.JobPlanKind(c.Operation) == "" {
			errs = append(errs, fmt.Errorf("--%s is for an Apply, a Refresh or a Destroy Job, not %q", runnerapi.FlagPlanID, c.Operation))
		}
	}
	if c.RefreshOnly && c.Operation != runnerapi.OperationPlan {
		errs = append(errs, fmt.Errorf("--%s is for a Plan Job, not %q", runnerapi.FlagRefreshOnly, c.Operation))
	}
	if c.DestroyPlan && (c.Operation != runnerapi.OperationPlan || c.RefreshOnly) {
		errs = append(errs, fmt.Errorf("--%s is for a Plan Job that is not refresh-only, not %q", runnerapi.FlagDestroyPlan, c.Operation))
	}
	if c.Target != "" {
		if c.Operation != runnerapi.OperationPlan || c.RefreshOnly || c.DestroyPlan {
			errs = append(errs, fmt.Errorf("--%s is for a Plan Job that is neither refresh-only nor a destroy plan, not %q", runnerapi.FlagTarget, c.Operation))
		}
		if _, err := runnerapi.ParseTarget(c.Target); err != nil {
			errs = append(errs, fmt.Errorf("--%s=%q: %w", runnerapi.FlagTarget, c.Target, err))
		}
	}
	return errs
}

// usageError marks bad flags or configuration.
type usageError struct{ error }

// Main is `runner channel`: it parses the flags, serves until a signal or ctx ends, and
// returns the exit code.
func Main(ctx context.Context, args, environ []string, stderr io.Writer, signals <-chan os.Signal) int {
	log := logr.FromContextOrDiscard(ctx).WithName("channel")
	ctx = logr.NewContext(ctx, log)
	cfg, err := parse(args, environ, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return runnerapi.ExitOK
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "runner channel: %v\n", err)
		return runnerapi.ExitBadInput
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case sig := <-signals:
			log.Info("signal received; stopping", "signal", sig.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := Serve(ctx, cfg); err != nil {
		log.Error(err, "state channel failed")
		var ue usageError
		if errors.As(err, &ue) {
			return runnerapi.ExitBadInput
		}
		return runnerapi.ExitInternal
	}
	return runnerapi.ExitOK
}

func parse(args, environ []string, stderr io.Writer) (Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	cfg := Config{Pod: env[runnerapi.EnvChannelPodName]}
	if host, port := env[runnerapi.EnvServiceHost], env[runnerapi.EnvServicePort]; host != "" && port != "" {
		cfg.APIServer = "https://" + net.JoinHostPort(host, port)
	}
	fs := flag.NewFlagSet("runner channel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Dir, runnerapi.FlagDir, runnerapi.ChannelDir, "folder shared with the main container")
	fs.StringVar(&cfg.Namespace, runnerapi.FlagNamespace, "", "namespace of the object's state")
	fs.StringVar(&cfg.Suffix, runnerapi.FlagSuffix, "", "state suffix of the object")
	fs.StringVar(&cfg.Job, runnerapi.FlagJob, "", "the channel's Job")
	fs.StringVar(&cfg.RunLease, runnerapi.FlagRunLease, "", "the object's run lease")
	fs.StringVar(&cfg.OwnerKind, runnerapi.FlagOwnerKind, "", "kind of the object")
	fs.StringVar(&cfg.OwnerName, runnerapi.FlagOwnerName, "", "name of the object")
	fs.StringVar(&cfg.OwnerUID, runnerapi.FlagOwnerUID, "", "UID of the object")
	fs.StringVar(&cfg.TokenFile, runnerapi.FlagTokenFile, filepath.Join(runnerapi.ServiceAccountDir, runnerapi.ServiceAccountTokenFile), "projected ServiceAccount token")
	fs.StringVar(&cfg.CAFile, runnerapi.FlagCAFile, filepath.Join(runnerapi.ServiceAccountDir, runnerapi.ServiceAccountCAFile), "the API server's CA bundle")
	fs.StringVar(&cfg.Operation, runnerapi.FlagOperation, "", "the Job's operation (only a Plan Job stores a plan)")
	fs.StringVar(&cfg.InputsHash, runnerapi.FlagInputsHash, "", "the Job's inputs hash (a stored plan's ID covers it)")
	fs.StringVar(&cfg.PlanID, runnerapi.FlagPlanID, "", "the saved plan this Apply, Refresh or Destroy Job may fetch, once")
	fs.BoolVar(&cfg.RefreshOnly, runnerapi.FlagRefreshOnly, false, "a Plan Job: the plan it stores is refresh-only (only a Refresh Job applies it)")
	fs.BoolVar(&cfg.DestroyPlan, runnerapi.FlagDestroyPlan, false, "a Plan Job: the plan it stores is a destroy plan (only a Destroy Job applies it)")
	fs.StringVar(&cfg.Target, runnerapi.FlagTarget, "", "a Plan Job: the targeted operation its plan carries out (recorded in the plan record)")
	fs.StringVar(&cfg.StateLineage, runnerapi.FlagStateLineage, "", "the only state lineage the channel serves (the one the controller read)")
	if err := fs.Parse(args); err != nil {
		return cfg, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if ns := env[runnerapi.EnvChannelPodNamespace]; ns != "" && ns != cfg.Namespace {
		return cfg, fmt.Errorf("--%s=%s but the pod runs in namespace %s", runnerapi.FlagNamespace, cfg.Namespace, ns)
	}
	if cfg.APIServer == "" {
		return cfg, fmt.Errorf("$%s and $%s are required", runnerapi.EnvServiceHost, runnerapi.EnvServicePort)
	}
	return cfg, cfg.validate()
}

// Serve runs the channel until ctx ends: it writes the credential, listens on loopback,
// writes the address (last: its presence says the channel serves) and answers Terraform's
// http backend for the one state of cfg.
func Serve(ctx context.Context, cfg Config) error {
	_, err := serve(ctx, cfg, nil)
	return err
}

// serve is Serve; ready, when set, receives the server once it listens (tests).
func serve(ctx context.Context, cfg Config, ready func(*server)) (*server, error) {
	log := logr.FromContextOrDiscard(ctx)
	if err := cfg.validate(); err != nil {
		return nil, usageError{err}
	}
	kube, err := newKubeClient(cfg.APIServer, cfg.CAFile, cfg.TokenFile)
	if err != nil {
		return nil, usageError{err}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create channel folder: %w", err)
	}
	cred, err := credential(cfg.Dir)
	if err != nil {
		return nil, err
	}
	ln, err := listen(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &server{
		cfg: cfg, store: newStore(kube, cfg.Namespace, cfg.Suffix, cfg.RunLease), credential: cred, now: time.Now,
		ownerNameLabel: runnerapi.LabelValue(cfg.OwnerName), records: &records{dir: cfg.Dir, log: log},
	}
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	addr := "http://" + ln.Addr().String()
	if err := writeAtomic(filepath.Join(cfg.Dir, runnerapi.ChannelAddressFile), []byte(addr), 0o644); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if ready != nil {
		ready(s)
	}
	log.Info("serving", "address", addr, "path", s.statePath(), "job", cfg.Job, "pod", cfg.Pod, "runLease", cfg.RunLease,
		"operation", cfg.Operation, "planID", cfg.PlanID, "refreshOnly", cfg.RefreshOnly, "destroyPlan", cfg.DestroyPlan, "target", cfg.Target, "stateLineage", cfg.StateLineage)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return s, fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	err = hs.Shutdown(sctx)
	// Serve may not have started when Shutdown ran; either way the port is free once both the
	// listener is closed and Serve has returned.
	_ = ln.Close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		log.Error(serr, "serve")
	}
	if err != nil {
		return s, fmt.Errorf("shut down: %w", err)
	}
	log.Info("stopped")
	return s, nil
}

// credential returns the per-run password: the one in the folder when the channel restarts
// (the runner's terraform already holds it), else a new random one written with mode 0600.
func credential(dir string) (string, error) {
	p := filepath.Join(dir, runnerapi.ChannelCredentialFile)
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read credential: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate credential: %w", err)
	}
	cred := hex.EncodeToString(buf)
	if err := writeAtomic(p, []byte(cred), 0o600); err != nil {
		return "", err
	}
	return cred, nil
}

// listen listens on cfg.Listen, or on the loopback port a previous run of this channel had
// (a restarted sidecar keeps its address), else on an ephemeral loopback port.
func listen(ctx context.Context, cfg Config) (net.Listener, error) {
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		return ln, nil
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, runnerapi.ChannelAddressFile)); err == nil {
		if u, err := url.Parse(strings.TrimSpace(string(b))); err == nil {
			if host, _, err := net.SplitHostPort(u.Host); err == nil && host == "127.0.0.1" {
				ln, err := net.Listen("tcp", u.Host)
				if err == nil {
					return ln, nil
				}
				logr.FromContextOrDiscard(ctx).Info("cannot listen on the address of the previous run; taking a new port (the runner's terraform loses the channel)",
					"address", u.Host, "error", err.Error())
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback: %w", err)
	}
	return ln, nil
}
