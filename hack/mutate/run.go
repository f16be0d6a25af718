package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Status is the outcome of one mutation.
type Status string

// Outcomes. Only Killed counts as a proof.
const (
	// Killed: the test command failed and named at least one failing test.
	Killed Status = "KILLED"
	// Survived: the test command passed with the mutation applied.
	Survived Status = "SURVIVED"
	// Stale: the old text does not occur exactly once in the file (or the file is gone).
	Stale Status = "STALE"
	// Invalid: a package the test command builds (the mutated one among its dependencies) no
	// longer compiles.
	Invalid Status = "INVALID"
	// Unproven: the test command failed without naming a failing test (build or setup).
	Unproven Status = "UNPROVEN"
	// Timeout: the test command outlived the time allowed and was stopped.
	Timeout Status = "TIMEOUT"
	// Baseline: the test command fails without the mutation, so its failure proves nothing.
	Baseline Status = "BASELINE"
	// NotRun: the run was interrupted before this mutation.
	NotRun Status = "NOT RUN"
)

// Result is what one mutation came to.
type Result struct {
	M      Mutation
	Status Status
	// Killers name the failing tests (Killed, Timeout, Unproven may carry some).
	Killers []string
	// Detail says why a mutation is not Killed or Survived.
	Detail string
	// Took is the time of the test command.
	Took time.Duration
}

// Runner applies mutations to a scratch copy and runs their test commands.
type Runner struct {
	// Dir is the root of the scratch copy.
	Dir string
	// Env is the environment of every command.
	Env []string
	// Logs is the folder each command's output is written to (one file per command).
	Logs string
	// Timeout bounds one test command.
	Timeout time.Duration
	// Grace is how long a stopped command gets between SIGINT and SIGKILL (default 30s).
	Grace time.Duration
}

// Occurrences counts old in the file content.
func Occurrences(content, old string) int { return strings.Count(content, old) }

// Apply rewrites m.File in the copy and returns the function that restores it. It reports a
// Stale result when the old text does not occur exactly once.
func (r *Runner) Apply(m Mutation) (restore func() error, stale string, err error) {
	p := filepath.Join(r.Dir, m.File)
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "the file does not exist", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("stat %s: %w", m.File, err)
	}
	orig, err := os.ReadFile(p)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", m.File, err)
	}
	if n := Occurrences(string(orig), m.Old); n != 1 {
		return nil, fmt.Sprintf("the old text occurs %d times in the file, not once", n), nil
	}
	mutated := strings.Replace(string(orig), m.Old, m.New, 1)
	if err := os.WriteFile(p, []byte(mutated), fi.Mode().Perm()); err != nil {
		return nil, "", fmt.Errorf("write %s: %w", m.File, err)
	}
	return func() error {
		if err := os.WriteFile(p, orig, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("restore %s: %w", m.File, err)
		}
		return nil
	}, "", nil
}

// Mutate runs one mutation from start to end and restores the file, whatever happens.
// A non-nil error means the copy may be in an unknown state (a restore failed) or the run was
// interrupted: the caller stops.
func (r *Runner) Mutate(ctx context.Context, m Mutation, logName string) (res Result, err error) {
	res = Result{M: m}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	restore, stale, err := r.Apply(m)
	if err != nil {
		return res, err
	}
	if stale != "" {
		res.Status, res.Detail = Stale, stale
		return res, nil
	}
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	out, run, err := r.Exec(ctx, logName, m.Command)
	if err != nil {
		return res, err
	}
	if run.Interrupted {
		return res, context.Cause(ctx)
	}
	res.Status, res.Killers, res.Detail = Judge(out, run)
	return res, nil
}

// buildFailed matches go test's summary line of a package that did not compile (its own code,
// its tests, or a dependency such as the mutated package): "FAIL\t<pkg> [build failed]", or
// "[setup failed]" when the package cannot even be loaded.
var buildFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+ \[(build|setup) failed\]`)

// Judge turns a finished test command into a status. A test binary that did not compile makes
// the mutation Invalid: go test compiles every package it tests, the mutated one among their
// dependencies, so a mutation that breaks compilation shows here without a separate check.
func Judge(out string, run Run) (Status, []string, string) {
	killers := FailingTests(out)
	switch {
	case run.TimedOut:
		return Timeout, killers, fmt.Sprintf("stopped after %s", run.Took.Round(time.Second))
	case run.ExitCode == 0:
		return Survived, nil, ""
	case buildFailed.MatchString(out):
		return Invalid, nil, "the mutated code does not compile: " + firstLines(out, 3)
	case len(killers) == 0:
		return Unproven, nil, fmt.Sprintf("exit %d without a failing test: %s", run.ExitCode, firstLines(out, 3))
	}
	return Killed, killers, ""
}

// Run is how a command ended.
type Run struct {
	ExitCode    int
	TimedOut    bool
	Interrupted bool
	Took        time.Duration
	// Log is the file holding the command's output.
	Log string
}

// Exec runs command with bash in the copy, in its own process group, with its output in a
// log file. On timeout or interruption the group gets SIGINT (Ginkgo and envtest clean up on
// it), then SIGKILL after the grace; after any end, what is left of the group is killed.
func (r *Runner) Exec(ctx context.Context, logName, command string) (string, Run, error) {
	logPath := filepath.Join(r.Logs, sanitize(logName)+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return "", Run{}, fmt.Errorf("log file: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(f, "$ %s\n", command)
	cmd := exec.Command("bash", "-o", "pipefail", "-c", command)
	cmd.Dir = r.Dir
	cmd.Env = append(append([]string{}, r.Env...), "PWD="+r.Dir)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", Run{}, fmt.Errorf("start %q: %w", command, err)
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	run := Run{Log: logPath}
	timer := time.NewTimer(r.timeout())
	defer timer.Stop()
	var werr error
	select {
	case werr = <-done:
	case <-timer.C:
		run.TimedOut = true
		werr = r.stop(pgid, done)
	case <-ctx.Done():
		run.Interrupted = true
		werr = r.stop(pgid, done)
	}
	// Whatever the command left behind in its group (an API server, etcd) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	run.Took = time.Since(start)
	var exit *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &exit):
		run.ExitCode = exit.ExitCode()
		if run.ExitCode < 0 {
			run.ExitCode = 128 + int(exit.Sys().(syscall.WaitStatus).Signal())
		}
	default:
		return "", run, fmt.Errorf("wait for %q: %w", command, werr)
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		return "", run, fmt.Errorf("read log: %w", err)
	}
	return string(out), run, nil
}

// stop interrupts the process group, waits up to the grace, then kills it.
func (r *Runner) stop(pgid int, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	grace := r.Grace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return 15 * time.Minute
	}
	return r.Timeout
}

// sanitize makes a mutation name a file name.
func sanitize(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			return c
		}
		return '_'
	}, s)
}

// firstLines returns up to n non-empty lines of s that are not the echoed command, joined.
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "$ ") {
			continue
		}
		out = append(out, l)
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, " / ")
}
