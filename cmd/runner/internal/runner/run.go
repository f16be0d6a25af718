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

	"github.com/captf/cluster-api-provider-terraform/cmd/runner/internal/channel"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// tailLines is how many lines of a failing command's stderr the result keeps (before the
// 4 KiB cap cuts more).
const tailLines = 60

// waitDelay bounds how long the runner waits for a finished command's output pipes, which a
// leftover grandchild could hold open.
const waitDelay = 30 * time.Second

// Config is one run of an operation: the command line the controller composed
// (runnerapi.Invocation, parsed back by parseRun from the flags runnerapi.Command writes: one
// shape on both sides), and what the process brings.
//
// Of the Invocation: Binary names terraform/tofu explicitly (path, or name looked up on PATH);
// ChannelDir, when set, is the state channel's folder, and terraform uses the http backend on
// the channel (the Job's way), else the kubernetes backend with the pod's or a kubeconfig's
// credentials; PlanID (Apply, Refresh or Destroy, with a channel) applies that saved plan,
// fetched through the channel, instead of planning afresh (each only a plan of its kind,
// runnerapi.PlanKindRefusal); RefreshOnly (Plan or Drift) makes a refresh-only plan (`plan
// -refresh-only`), which a Refresh Job applies later; DestroyPlan (Plan) makes a destroy plan
// (`plan -destroy`), which a Destroy Job applies later; Target (Apply or Plan) replaces,
// imports or forgets one resource (runnerapi.ParseTarget; StepOptions.Target, writeTargetBlock).
type Config struct {
	runnerapi.Invocation
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
	// ChannelWait bounds the wait for the channel's address file; default DefaultChannelWait.
	ChannelWait time.Duration
}

// DefaultChannelWait is how long the runner waits for the state channel to serve.
const DefaultChannelWait = 60 * time.Second

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
	// plan is what the run learnt of its plan so far.
	plan planState
}

// planState is what runSteps learns of a plan: the summary and the masked JSON plan (from
// show-json), the text (show), and for an apply of a saved plan, that plan and whether
// terraform found it stale.
type planState struct {
	summary *runnerapi.PlanSummary
	text    string
	json    []byte
	fetched *runnerapi.PlanRef
	stale   bool
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
	s := &session{cfg: cfg, getenv: envLookup(cfg.Environ), out: &syncWriter{w: cfg.Stdout}, redactor: NewRedactor(registryTokens(cfg.Environ))}
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

// execute runs the operation and fills res; it returns the exit code. It is the three phases
// in order: prepare (inputs, binary, module copy, backend, environment, commands), runSteps
// (the commands, signals forwarded) and interpret (what the commands' ending means).
func (s *session) execute(ctx context.Context, res *runnerapi.Result) int {
	p, err := s.prepare(ctx, res)
	if err != nil {
		return s.fail(ctx, res, err)
	}
	end := s.runSteps(ctx, p, res)
	code := s.interpret(ctx, res, end)
	if p.channel != nil {
		code = s.interpretChannel(ctx, res, end, code)
	}
	return code
}

// prepared is what prepare hands to runSteps.
type prepared struct {
	in    Inputs
	steps []Step
	// pushFile is where a restore writes the state it pushes.
	pushFile string
	// channel is the state channel terraform uses; nil: the kubernetes backend.
	channel *ChannelBackend
	// planFile is where a plan is saved (or a saved plan is put to be applied).
	planFile string
	// target is the run's targeted operation (--target); zero without one.
	target runnerapi.Target
}

// stepsEnd says how runSteps ended.
type stepsEnd struct {
	// err: the runner itself failed (a command could not start, a restore was refused, the
	// backend moved); the remaining fields are then unset.
	err error
	// step is the last step that ran (or was about to run, when ran is false).
	step Step
	// ran: the step ran and rec is its record; false when a signal stopped the run before it.
	ran bool
	rec runnerapi.Step
	// tail is the redacted end of the step's stderr.
	tail string
	// last: step is the operation's last step.
	last bool
}

// runSteps runs the commands in order, recording each in res.Steps and the plan and drift
// findings in res. It stops at the first command that fails, at an interruption, or when the
// runner itself fails. Around each command run two hooks: beforeStep (a restore's push) and
// afterStep (what a command that succeeded leaves for the result and for later steps); after a
// successful init, noteUndeclared reads which variables the module does not declare.
func (s *session) runSteps(ctx context.Context, p prepared, res *runnerapi.Result) stepsEnd {
	var pulled []byte
	for i, st := range p.steps {
		last := i == len(p.steps)-1
		if s.pollSignal(ctx) {
			return stepsEnd{step: st, last: last}
		}
		if st.Internal {
			if err := s.internalStep(ctx, st, p, res); err != nil {
				return stepsEnd{err: err}
			}
			if last {
				return stepsEnd{step: st, ran: true, last: true}
			}
			continue
		}
		if end, done := s.beforeStep(ctx, st, p, pulled, res, last); done {
			return end
		}
		rs, captured, tail, err := s.runStep(ctx, st)
		res.Steps = append(res.Steps, rs)
		end := stepsEnd{step: st, ran: true, rec: rs, tail: tail, last: last}
		if err != nil {
			return stepsEnd{err: err}
		}
		s.noteSavedPlan(st, rs, tail, res)
		if s.interrupted != nil && (!s.stepOK(st, rs.ExitCode) || !last) {
			return end
		}
		if !s.stepOK(st, rs.ExitCode) {
			return end
		}
		if err := s.afterStep(st, rs, captured, p, res, &pulled); err != nil {
			return stepsEnd{err: err}
		}
		if st.Name == StepInit {
			s.noteUndeclared(ctx, p, res)
		}
		if last {
			return end
		}
	}
	return stepsEnd{}
}

// beforeStep is the hook before a command: a restore's `state push` gets its push file, made
// from the backup and the state pulled before it (planRestore), or, when there is no state at
// all, is done here instead by seeding the backup through the state channel with its lineage
// kept. done says runSteps ends with end (the seed's step record, or the runner's error).
func (s *session) beforeStep(ctx context.Context, st Step, p prepared, pulled []byte, res *runnerapi.Result, last bool) (end stepsEnd, done bool) {
	if st.Name != StepStatePush {
		return stepsEnd{}, false
	}
	backup, err := os.ReadFile(p.in.RestoreFile)
	if err != nil {
		return stepsEnd{err: badInput("read %s: %w", runnerapi.KeyRestoreState, err)}, true
	}
	if absentState(pulled) {
		// No state at all: terraform would push the backup under a new lineage.
		if p.channel == nil {
			return stepsEnd{err: errSeedNeedsChannel}, true
		}
		start := time.Now()
		if err := s.seedState(ctx, *p.channel, backup); err != nil {
			return stepsEnd{err: err}, true
		}
		rs := runnerapi.Step{Name: st.Name, DurationMs: time.Since(start).Milliseconds()}
		res.Steps = append(res.Steps, rs)
		return stepsEnd{step: st, ran: true, rec: rs, last: last}, true
	}
	push, err := planRestore(pulled, backup, p.in.Restore)
	if err != nil {
		return stepsEnd{err: err}, true
	}
	if err := writePrivate(p.pushFile, push); err != nil {
		return stepsEnd{err: err}, true
	}
	return stepsEnd{}, false
}

// noteSavedPlan records what became of a fetched saved plan once the step that applies it
// ran: terraform refuses a plan whose state moved on before it applies anything (the plan is
// stale); otherwise it ran this plan (all of it when it succeeded).
func (s *session) noteSavedPlan(st Step, rs runnerapi.Step, tail string, res *runnerapi.Result) {
	if !st.SavedPlan || s.plan.fetched == nil {
		return
	}
	if rs.ExitCode != 0 && staleMessages.MatchString(tail) {
		s.plan.stale = true
		res.PlanStale = true
		return
	}
	ref := *s.plan.fetched
	res.AppliedPlan = &ref
}

// afterStep is the hook after a command that succeeded: init's backend record is checked, a
// pulled state is kept for the restore's push (*pulled), a plan's JSON becomes its summary and
// its text the plan text, and a detailed exit code says whether there are changes (drift, for
// a Drift check). An error ends the run as the runner's own failure.
func (s *session) afterStep(st Step, rs runnerapi.Step, captured []byte, p prepared, res *runnerapi.Result, pulled *[]byte) error {
	switch {
	case st.Name == StepInit && p.channel != nil:
		return VerifyHTTPBackend(s.dir)
	case st.Name == StepInit:
		return VerifyBackend(s.dir, p.in.Backend)
	case st.Name == StepStatePull:
		*pulled = captured
	case st.Name == StepShowJSON:
		sum, err := Summarize(captured, s.refreshOnly())
		if err != nil {
			return err
		}
		sum = s.redactSummary(sum)
		s.plan.summary = &sum
		if s.plan.json, err = MaskPlanJSON(captured, s.redactor.Redact, runnerapi.MaxPlanJSONBytes); err != nil {
			return err
		}
		bounded := sum.Bounded(runnerapi.MaxResultAddresses)
		res.Summary = &bounded
		if s.cfg.Operation == runnerapi.OperationDrift {
			res.Health = HealthOf(captured, s.redactor.Redact)
		}
	case st.Name == StepShow:
		s.plan.text = s.planText(captured)
	case st.DetailedExitCode:
		changed := rs.ExitCode == 2
		if s.cfg.Operation == runnerapi.OperationDrift {
			res.Drift = &changed
		} else {
			res.Changes = &changed
		}
	}
	return nil
}

// interpret turns how the steps ended into the result's outcome and error and the exit code.
func (s *session) interpret(ctx context.Context, res *runnerapi.Result, end stepsEnd) int {
	log := logr.FromContextOrDiscard(ctx)
	switch {
	case end.err != nil:
		return s.fail(ctx, res, end.err)
	case !end.ran && s.interrupted != nil:
		return s.interruptedBefore(res, end.step.Name)
	case s.interrupted != nil && (!s.stepOK(end.step, end.rec.ExitCode) || !end.last):
		res.Outcome = runnerapi.OutcomeInterrupted
		res.Error = s.redactor.Redact(fmt.Sprintf("interrupted by %s during %s; %s exited with code %d\n%s",
			s.interrupted, end.step.Name, res.Binary, end.rec.ExitCode, end.tail))
		return runnerapi.ExitInterrupted
	case end.ran && s.plan.stale && end.step.SavedPlan:
		res.Outcome = runnerapi.OutcomeFailed
		res.Error = s.redactor.Redact(fmt.Sprintf("the saved plan %s is stale: the state changed since the plan was made, so %s refused it and applied nothing; plan again\n%s",
			s.cfg.PlanID, res.Binary, end.tail))
		return runnerapi.ExitPlanRefused
	case end.ran && !s.stepOK(end.step, end.rec.ExitCode):
		res.Outcome = runnerapi.OutcomeFailed
		res.Error = s.redactor.Redact(fmt.Sprintf("%s exited with code %d\n%s", end.step.Name, end.rec.ExitCode, end.tail))
		return runnerapi.ExitTerraformFailed
	}
	res.Outcome = runnerapi.OutcomeSucceeded
	log.Info("run succeeded", "operation", s.cfg.Operation)
	return runnerapi.ExitOK
}

// interpretChannel adds what the state channel recorded: a lock it broke (always reported), a
// state write it refused (always the outcome Failed), a refused read or a fencing that
// explains a failed run (outcome Failed or Fenced), and the holder of a lock the run could not
// take (a run that did not succeed).
func (s *session) interpretChannel(ctx context.Context, res *runnerapi.Result, end stepsEnd, code int) int {
	log := logr.FromContextOrDiscard(ctx)
	rec, err := channel.ReadRecords(s.cfg.ChannelDir)
	if err != nil {
		log.Error(err, "read the state channel's records")
	}
	res.LockBroken = rec.LockBroken
	if sr := rec.StateRefused; sr != nil && sr.Write() && end.err == nil && end.ran &&
		(res.Outcome == runnerapi.OutcomeSucceeded || res.Outcome == runnerapi.OutcomeFailed) {
		// Terraform writes only its own state's lineage: a refused write came from something
		// else holding the run's credential (the module). The run fails even when terraform
		// finished, so the attempt is not hidden behind a success. (An interrupted run stays
		// Interrupted; a fenced write never reaches the lineage check.)
		expected, sent := "lineage "+sr.Expected, sr.Sent
		if sr.Expected == "" {
			expected = "no lineage pinned yet"
		}
		if sent == "" {
			sent = "no state document with a lineage"
		} else {
			sent = "lineage " + sent
		}
		res.Outcome = runnerapi.OutcomeFailed
		res.Error = s.redactor.Redact(fmt.Sprintf("the state channel refused a state write during %s (this run's state: %s; the write sent %s): nothing was written, the state Secret keeps this run's state; something besides terraform wrote with the run's credential\n%s",
			end.step.Name, expected, sent, end.tail))
		log.Info("the state channel refused a state write", "expected", sr.Expected, "sent", sr.Sent)
		if code == runnerapi.ExitOK {
			code = runnerapi.ExitTerraformFailed
		}
		return code
	}
	if res.Outcome == runnerapi.OutcomeSucceeded {
		return code
	}
	res.LockHolder = rec.LockHolder
	if sr := rec.StateRefused; sr != nil && end.err == nil && end.ran {
		found := "no state"
		if sr.Found != "" {
			found = "lineage " + sr.Found
		}
		res.Error = s.redactor.Redact(fmt.Sprintf("the state changed since the controller read it (lineage %s; the state Secret now holds %s): the state channel refused to serve it, so %s stopped and changed nothing\n%s",
			sr.Expected, found, end.step.Name, end.tail))
		log.Info("the state channel refused the state", "expected", sr.Expected, "found", sr.Found)
		return code
	}
	if rec.Fenced != nil && end.err == nil && end.ran {
		res.Outcome = runnerapi.OutcomeFenced
		holder := rec.Fenced.RunLeaseHolder
		if holder == "" {
			holder = "no Job"
		}
		res.Error = s.redactor.Redact(fmt.Sprintf("fenced: the object's run lease names %s, not this Job, so the state channel refused %s; %s exited with code %d\n%s",
			holder, rec.Fenced.Request, end.step.Name, end.rec.ExitCode, end.tail))
		log.Info("run fenced", "runLeaseHolder", rec.Fenced.RunLeaseHolder, "request", rec.Fenced.Request)
		return runnerapi.ExitFenced
	}
	return code
}

// waitForChannel waits (bounded, and no longer once a signal came) for the state channel's
// address file and reads its credential.
func (s *session) waitForChannel(ctx context.Context, b runnerapi.Backend) (*ChannelBackend, error) {
	log := logr.FromContextOrDiscard(ctx)
	wait := s.cfg.ChannelWait
	if wait <= 0 {
		wait = DefaultChannelWait
	}
	addrFile := filepath.Join(s.cfg.ChannelDir, runnerapi.ChannelAddressFile)
	deadline := time.Now().Add(wait)
	for {
		addr, err := os.ReadFile(addrFile)
		if err == nil && len(bytes.TrimSpace(addr)) > 0 {
			cred, err := os.ReadFile(filepath.Join(s.cfg.ChannelDir, runnerapi.ChannelCredentialFile))
			if err != nil {
				return nil, fmt.Errorf("read the state channel's credential: %w", err)
			}
			base := strings.TrimRight(strings.TrimSpace(string(addr)), "/")
			if !strings.HasPrefix(base, "http://127.0.0.1:") {
				return nil, fmt.Errorf("the state channel's address %q is not on loopback", base)
			}
			c := &ChannelBackend{Base: base, URL: base + channel.StatePathPrefix + b.Namespace + "/" + b.SecretSuffix,
				PlanURL: base + runnerapi.PlanPathPrefix + b.Namespace + "/" + b.SecretSuffix, Password: strings.TrimSpace(string(cred))}
			if c.Password == "" {
				return nil, errors.New("the state channel's credential is empty")
			}
			log.Info("state channel found", "address", base)
			return c, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read the state channel's address: %w", err)
		}
		if s.pollSignal(ctx) {
			// runSteps reports the interruption before init.
			return &ChannelBackend{}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the state channel did not write %s within %s", addrFile, wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the state channel: %w", ctx.Err())
		case <-time.After(channelPoll):
		}
	}
}

// channelPoll is how often the runner looks for the channel's address file.
const channelPoll = 5 * time.Millisecond

// fail records the runner's own failure and returns its exit code.
func (s *session) fail(ctx context.Context, res *runnerapi.Result, err error) int {
	res.Outcome = runnerapi.OutcomeFailed
	res.Error = s.redactor.Redact(err.Error())
	logr.FromContextOrDiscard(ctx).Info("run failed", "error", res.Error)
	var bad badInputError
	var refused planRefusedError
	var fenced fencedError
	switch {
	case errors.As(err, &refused):
		res.PlanRefused = refused.reason
		return runnerapi.ExitPlanRefused
	case errors.As(err, &fenced):
		res.Outcome = runnerapi.OutcomeFenced
		return runnerapi.ExitFenced
	case errors.As(err, &bad):
		return runnerapi.ExitBadInput
	case errors.Is(err, errBinaryMissing):
		return runnerapi.ExitBinaryMissing
	}
	return runnerapi.ExitInternal
}

// refreshOnly: the run's plan is a refresh-only plan (a Refresh, a refresh-only Plan, or the
// drift check of mode Accept).
func (s *session) refreshOnly() bool {
	return s.cfg.Operation == runnerapi.OperationRefresh || s.cfg.RefreshOnly
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
// workspace forced. Removed: TF_WORKSPACE, TF_DATA_DIR, TF_CLI_ARGS*, TF_HTTP_* (the http
// backend's settings; a channel run sets its password itself), and every KUBE_* but
// KUBE_CONFIG_PATH (which the override repeats as config_path). Terraform's kubernetes backend
// falls back to KUBE_HOST, KUBE_TOKEN, KUBE_CTX, KUBE_PROXY_URL, ... even when the override sets
// those settings to "", so pinning alone does not keep the state in place.
func ChildEnv(environ []string) []string {
	return childEnv(environ, false)
}

// childEnv is ChildEnv; a channel run (which needs no Kubernetes access at all) also drops
// KUBE_CONFIG_PATH and KUBECONFIG.
func childEnv(environ []string, channelRun bool) []string {
	forced := []string{"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_WORKSPACE=default"}
	out := make([]string, 0, len(environ)+len(forced))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "TF_WORKSPACE", k == "TF_DATA_DIR", k == "TF_CLI_ARGS", strings.HasPrefix(k, "TF_CLI_ARGS_"), strings.HasPrefix(k, "TF_HTTP_"),
			k == "TF_IN_AUTOMATION", k == "TF_INPUT", k == "CHECKPOINT_DISABLE",
			strings.HasPrefix(k, "KUBE_") && (channelRun || k != runnerapi.EnvKubeConfigPath),
			channelRun && k == runnerapi.EnvKubeConfig:
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
