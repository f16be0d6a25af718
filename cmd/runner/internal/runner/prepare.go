package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// prepare checks the configuration and the inputs, picks the binary, copies the module, writes
// the backend override and sets up terraform's environment. It runs no terraform command. Its
// parts, in order: checkFlags and resolveDirs (the command line), the inputs (redact.json
// first, so every later error is masked), pickBinary, connect (the state channel, when the run
// has one), setUpWorkDir (module, backend override, an import's import block, environment) and
// the operation's Steps.
func (s *session) prepare(ctx context.Context, res *runnerapi.Result) (prepared, error) {
	cfg := &s.cfg
	var p prepared
	var err error
	if p.target, err = checkFlags(*cfg); err != nil {
		return p, err
	}
	if err := resolveDirs(cfg); err != nil {
		return p, err
	}
	redact, err := readRedact(cfg.InputsDir)
	if err != nil {
		return p, err
	}
	redact = append(redact, registryTokens(cfg.Environ)...)
	s.redactor = NewRedactor(redact)
	if p.in, err = readInputs(cfg.InputsDir, cfg.Operation, redact); err != nil {
		return p, err
	}
	if err := s.pickBinary(res); err != nil {
		return p, err
	}
	mode := DetectBackendMode(s.getenv)
	if p.channel, err = s.connect(ctx, p.in.Backend, redact, mode); err != nil {
		return p, err
	}
	if err := s.setUpWorkDir(p, mode); err != nil {
		return p, err
	}
	p.pushFile = filepath.Join(cfg.WorkDir, "restore.tfstate")
	p.planFile = filepath.Join(cfg.WorkDir, PlanFileName)
	if p.steps, err = Steps(cfg.Operation, StepOptions{VarFile: p.in.VarFile, LockTimeout: cfg.LockTimeout, PushFile: p.pushFile,
		PlanFile: p.planFile, ApplySavedPlan: cfg.PlanID != "", SavePlan: p.channel != nil, RefreshOnly: cfg.RefreshOnly,
		DestroyPlan: cfg.DestroyPlan, Target: p.target}); err != nil {
		return p, err
	}
	return p, nil
}

// checkFlags refuses a command line whose flags do not go together: an unknown operation, a
// negative lock timeout, --refresh-only outside a Plan or a Drift check, --destroy-plan outside
// a Plan (or with --refresh-only), a --target that runnerapi.ParseTarget refuses or outside an
// Apply or a Plan (or with --refresh-only or --destroy-plan), a --plan-id outside an Apply, a
// Refresh or a Destroy, not a plan ID, or without a state channel to fetch it through. It
// returns the parsed --target (zero without one).
func checkFlags(cfg Config) (runnerapi.Target, error) {
	if !runnerapi.ValidOperation(cfg.Operation) {
		return runnerapi.Target{}, badInput("unknown operation %q (want one of %v)", cfg.Operation, runnerapi.Operations)
	}
	if cfg.LockTimeout < 0 {
		return runnerapi.Target{}, badInput("negative lock timeout %s", cfg.LockTimeout)
	}
	if cfg.RefreshOnly && cfg.Operation != runnerapi.OperationPlan && cfg.Operation != runnerapi.OperationDrift {
		return runnerapi.Target{}, badInput("--%s is for a Plan or a Drift check, not a %s (a Refresh makes and applies its own refresh-only plan)", runnerapi.FlagRefreshOnly, cfg.Operation)
	}
	if cfg.DestroyPlan && (cfg.Operation != runnerapi.OperationPlan || cfg.RefreshOnly) {
		return runnerapi.Target{}, badInput("--%s is for a Plan that is not refresh-only, not a %s (a Destroy applies the destroy plan a Plan saved)", runnerapi.FlagDestroyPlan, cfg.Operation)
	}
	target, err := checkTarget(cfg)
	if err != nil {
		return runnerapi.Target{}, err
	}
	if cfg.PlanID == "" {
		return target, nil
	}
	switch {
	case runnerapi.JobPlanKind(cfg.Operation) == "":
		return runnerapi.Target{}, badInput("--%s is for an Apply, a Refresh or a Destroy, not a %s", runnerapi.FlagPlanID, cfg.Operation)
	case !runnerapi.ValidPlanID(cfg.PlanID):
		return runnerapi.Target{}, badInput("--%s=%q is not a plan ID", runnerapi.FlagPlanID, cfg.PlanID)
	case cfg.ChannelDir == "":
		return runnerapi.Target{}, badInput("%v", errNoChannelForPlan)
	}
	return target, nil
}

// checkTarget parses --target (runnerapi.ParseTarget, the rule the webhook and the controller
// apply too); only an Apply or a Plan that is neither refresh-only nor a destroy plan takes one.
func checkTarget(cfg Config) (runnerapi.Target, error) {
	if cfg.Target == "" {
		return runnerapi.Target{}, nil
	}
	if cfg.Operation != runnerapi.OperationApply && cfg.Operation != runnerapi.OperationPlan {
		return runnerapi.Target{}, badInput("--%s is for an Apply or a Plan, not a %s", runnerapi.FlagTarget, cfg.Operation)
	}
	if cfg.RefreshOnly || cfg.DestroyPlan {
		return runnerapi.Target{}, badInput("--%s is for an Apply or a Plan that is neither refresh-only nor a destroy plan", runnerapi.FlagTarget)
	}
	t, err := runnerapi.ParseTarget(cfg.Target)
	if err != nil {
		return runnerapi.Target{}, badInput("--%s=%q: %v", runnerapi.FlagTarget, cfg.Target, err)
	}
	return t, nil
}

// resolveDirs requires the module, inputs and work folders and makes them absolute (a relative
// --module-dir is relative to the image's working directory).
func resolveDirs(cfg *Config) error {
	dirs := map[string]*string{runnerapi.FlagModuleDir: &cfg.ModuleDir, runnerapi.FlagInputsDir: &cfg.InputsDir, runnerapi.FlagWorkDir: &cfg.WorkDir}
	for _, name := range []string{runnerapi.FlagModuleDir, runnerapi.FlagInputsDir, runnerapi.FlagWorkDir} {
		d := dirs[name]
		if *d == "" {
			return badInput("--%s is required", name)
		}
		abs, err := filepath.Abs(*d)
		if err != nil {
			return fmt.Errorf("resolve --%s: %w", name, err)
		}
		*d = abs
	}
	return nil
}

// pickBinary selects the terraform or tofu binary (the flag, then CAPTF_TF_BINARY, then PATH)
// and names it in the result.
func (s *session) pickBinary(res *runnerapi.Result) error {
	pathEnv := s.getenv("PATH")
	if pathEnv == "" {
		pathEnv = defaultPath
	}
	var err error
	if s.binary, err = SelectBinary(s.cfg.Binary, s.getenv(runnerapi.EnvBinary), pathEnv); err != nil {
		return err
	}
	res.Binary = filepath.Base(s.binary)
	return nil
}

// connect waits for the state channel when the run has one (nil when it has none), adds the
// channel's password to what the runner masks, and logs where the run's state lives.
func (s *session) connect(ctx context.Context, b runnerapi.Backend, redact []string, mode BackendMode) (*ChannelBackend, error) {
	log := logr.FromContextOrDiscard(ctx)
	cfg := &s.cfg
	if cfg.ChannelDir == "" {
		log.Info("starting", "operation", cfg.Operation, "job", s.getenv(runnerapi.EnvJobName), "pod", s.getenv(runnerapi.EnvPodName),
			"binary", s.binary, "namespace", b.Namespace, "stateSecret", runnerapi.StateSecretName(b.SecretSuffix),
			"inCluster", mode.InCluster, "kubeconfig", strings.Join(mode.ConfigPaths, string(os.PathListSeparator)))
		return nil, nil
	}
	ch, err := s.waitForChannel(ctx, b)
	if err != nil {
		return nil, err
	}
	s.redactor = NewRedactor(append(slices.Clone(redact), ch.Password))
	log.Info("starting", "operation", cfg.Operation, "job", s.getenv(runnerapi.EnvJobName), "pod", s.getenv(runnerapi.EnvPodName),
		"binary", s.binary, "namespace", b.Namespace, "stateSecret", runnerapi.StateSecretName(b.SecretSuffix),
		"stateChannel", ch.URL)
	return ch, nil
}

// setUpWorkDir copies the module into the work folder, writes a targeted operation's block
// (writeTargetBlock) and the backend override (the http backend on the channel, else the
// kubernetes backend) and builds terraform's environment: the backend's settings, a writable
// TMPDIR and the CA bundle.
func (s *session) setUpWorkDir(p prepared, mode BackendMode) error {
	cfg := &s.cfg
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return fmt.Errorf("create work folder: %w", err)
	}
	s.dir = filepath.Join(cfg.WorkDir, "module")
	if err := CopyModule(cfg.ModuleDir, s.dir); err != nil {
		return err
	}
	if err := writeTargetBlock(s.dir, p.target); err != nil {
		return err
	}
	if p.channel != nil {
		if err := os.WriteFile(filepath.Join(s.dir, BackendOverrideFile), HTTPBackendOverride(), 0o644); err != nil {
			return fmt.Errorf("write backend override: %w", err)
		}
		s.env = append(childEnv(cfg.Environ, true), HTTPBackendEnv(*p.channel)...)
	} else {
		if err := writeBackendOverride(s.dir, p.in.Backend, mode); err != nil {
			return err
		}
		s.env = ChildEnv(cfg.Environ)
	}
	// Terraform writes temporary files (provider downloads); the image may have no writable
	// /tmp (read-only root, minimal images).
	tmp := filepath.Join(cfg.WorkDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("create temp folder: %w", err)
	}
	s.env = withDefault(s.env, "TMPDIR", tmp)
	if bundle := caBundleFor(s.getenv, cfg.CABundle); bundle != "" {
		s.env = withDefault(s.env, "SSL_CERT_FILE", bundle)
	}
	return nil
}

// writeTargetBlock writes the block of an import or a forget (runnerapi.Target.BlockFile: an
// import block, a removed block) into dir, the run's copy of the module, as
// runnerapi.TargetBlockFile; a replace writes nothing. It is written for an apply of a saved
// plan too (which reads the configuration the plan file carries), so the configuration is the
// one the plan was made with. A module that ships a file of that name is refused: the runner
// would replace it, or terraform would read two blocks.
func writeTargetBlock(dir string, t runnerapi.Target) error {
	doc, err := t.BlockFile()
	if err != nil || doc == nil {
		return err
	}
	path := filepath.Join(dir, runnerapi.TargetBlockFile)
	if _, err := os.Lstat(path); err == nil {
		return badInput("the module has a file %s, the name the runner writes a targeted operation's block to: rename it", runnerapi.TargetBlockFile)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("look for %s in the module: %w", runnerapi.TargetBlockFile, err)
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		return fmt.Errorf("write the %s block: %w", t.Op, err)
	}
	return nil
}
