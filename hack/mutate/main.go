package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK          = 0
	exitNotKilled   = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// options are the command-line flags.
type options struct {
	repo     string
	lists    string
	only     string
	list     bool
	from     string
	baseline bool
	timeout  time.Duration
	logs     string
	report   string
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.repo, "repo", "", "the repository root (default: the git top level of the working directory)")
	fs.StringVar(&o.lists, "lists", "hack/mutations/*.txt", "the mutation lists, a glob relative to the repository root")
	fs.StringVar(&o.only, "only", os.Getenv("MUTATIONS"), "run only the mutations matching these comma-separated globs (name or <list>/<name>); default $MUTATIONS")
	fs.BoolVar(&o.list, "list", false, "print the selected mutations and whether each still applies; run nothing")
	fs.StringVar(&o.from, "from", string(FromHead), "what the scratch copy is made of: head (the commit) or worktree (the files as they are, uncommitted changes included)")
	fs.BoolVar(&o.baseline, "baseline", true, "first run each distinct test command without any mutation; a mutation whose command fails there is not run")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "stop a test command after this long")
	fs.StringVar(&o.logs, "logs", "", "keep every command's output in this folder (default: a temporary folder, removed at the end)")
	fs.StringVar(&o.report, "report", "", "also write the report (Markdown: date, commit, command, table, totals, how to add a mutation) to this file")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mutate: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	if o.repo == "" {
		top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			fmt.Fprintf(stderr, "mutate: find the repository root (set -repo): %v\n", err)
			return exitUsage
		}
		o.repo = strings.TrimSpace(string(top))
	}
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitUsage
	}
	o.repo = repo
	all, err := LoadLists(o.repo, o.lists)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitUsage
	}
	selected, err := Select(all, o.only)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitUsage
	}
	if o.list {
		return listMutations(ctx, o, selected, stdout, stderr)
	}
	return runMutations(ctx, o, args, selected, unselected(all, selected), stdout, stderr)
}

// listMutations prints each selected mutation and whether its old text occurs exactly once in
// the source the run would use.
func listMutations(ctx context.Context, o options, ms []Mutation, stdout, stderr io.Writer) int {
	read := fileReader(ctx, o.repo, Source(o.from))
	code := exitOK
	fmt.Fprintf(stdout, "| mutation | list | file | applies | test command |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range ms {
		applies := "yes"
		content, err := read(m.File)
		switch {
		case err != nil:
			applies, code = "STALE: "+err.Error(), exitNotKilled
		case Occurrences(content, m.Old) != 1:
			applies, code = fmt.Sprintf("STALE: the old text occurs %d times", Occurrences(content, m.Old)), exitNotKilled
		}
		fmt.Fprintf(stdout, "| %s | %s.txt:%d | %s | %s | `%s` |\n", cell(m.Name), m.List, m.Line, cell(m.File), cell(applies), cell(m.Command))
	}
	fmt.Fprintf(stderr, "%d mutation(s) selected\n", len(ms))
	return code
}

// fileReader reads a file of the given source: HEAD through git show, or the working tree.
func fileReader(ctx context.Context, repo string, src Source) func(string) (string, error) {
	cache := map[string]string{}
	return func(name string) (string, error) {
		if c, ok := cache[name]; ok {
			return c, nil
		}
		var b []byte
		var err error
		if src == FromWorktree {
			b, err = os.ReadFile(filepath.Join(repo, name))
		} else {
			b, err = exec.CommandContext(ctx, "git", "-C", repo, "show", "HEAD:"+name).Output()
		}
		if err != nil {
			return "", fmt.Errorf("%s is not in %s", name, src)
		}
		cache[name] = string(b)
		return cache[name], nil
	}
}

// commandEnv is the environment of the test commands: the caller's, with the variables the
// Makefile exports defaulted the same way when unset.
func commandEnv(repo string) []string {
	env := os.Environ()
	set := func(k, v string) {
		if _, ok := os.LookupEnv(k); !ok {
			env = append(env, k+"="+v)
		}
	}
	bin := filepath.Join(repo, "bin")
	set("KUBEBUILDER_ASSETS", bin)
	set("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "2m")
	set("CAPTF_TEST_TOFU", filepath.Join(bin, "tofu"))
	tf := filepath.Join(bin, "terraform")
	if p, err := exec.LookPath("terraform"); err == nil {
		tf = p
	}
	set("CAPTF_TEST_TERRAFORM", tf)
	return env
}

// unselected returns the mutations of all that are not in selected, in list order.
func unselected(all, selected []Mutation) []Mutation {
	in := map[string]bool{}
	for _, m := range selected {
		in[m.Name] = true
	}
	var out []Mutation
	for _, m := range all {
		if !in[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// shellQuote quotes each argument that needs it for bash, so a report's command can be pasted.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func runMutations(ctx context.Context, o options, args []string, ms, left []Mutation, stdout, stderr io.Writer) int {
	if len(ms) == 0 {
		fmt.Fprintln(stderr, "mutate: no mutation selected")
		return exitUsage
	}
	began := time.Now()
	commit, err := exec.CommandContext(ctx, "git", "-C", o.repo, "rev-parse", "HEAD").Output()
	if err != nil {
		fmt.Fprintf(stderr, "mutate: git rev-parse HEAD: %v\n", err)
		return exitUsage
	}
	if gone, err := SweepStale(""); err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
	} else if len(gone) > 0 {
		fmt.Fprintf(stderr, "mutate: removed %d scratch copies left by killed runs: %s\n", len(gone), strings.Join(gone, " "))
	}
	s, err := NewScratch(ctx, "", o.repo, Source(o.from))
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitUsage
	}
	defer func() {
		if err := s.Remove(); err != nil {
			fmt.Fprintf(stderr, "mutate: remove the scratch copy %s: %v\n", s.Root, err)
		}
	}()
	logs := o.logs
	if logs == "" {
		logs = filepath.Join(s.Root, "logs")
	}
	if err := os.MkdirAll(logs, 0o755); err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitUsage
	}
	r := &Runner{Dir: s.Src, Env: commandEnv(o.repo), Logs: logs, Timeout: o.timeout}
	fmt.Fprintf(stderr, "mutate: %d mutation(s) of %s (%s) in %s\n", len(ms), shortHash(string(commit)), o.from, s.Src)

	broken := map[string]string{}
	if o.baseline {
		if err := runBaselines(ctx, r, ms, broken, stderr); err != nil {
			fmt.Fprintf(stderr, "mutate: %v\n", err)
			return exitInterrupted
		}
	}
	results, interrupted := mutateAll(ctx, r, ms, broken, stderr)
	t := Totals(results)
	t.Took = time.Since(began)
	fmt.Fprint(stdout, Table(results))
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, t.String())
	if o.logs != "" {
		fmt.Fprintf(stdout, "logs: %s\n", o.logs)
	}
	if o.report != "" {
		rep := Report{When: began, Commit: strings.TrimSpace(string(commit)), From: Source(o.from),
			Command: strings.TrimSpace("bin/mutate " + shellQuote(args)), Only: o.only, Baseline: o.baseline,
			Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
			Results: results, Totals: t, Unselected: left}
		if err := os.WriteFile(o.report, []byte(rep.Markdown()), 0o644); err != nil {
			fmt.Fprintf(stderr, "mutate: write the report: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "mutate: report written to %s\n", o.report)
	}
	switch {
	case interrupted || ctx.Err() != nil:
		return exitInterrupted
	case t.Killed != len(results):
		return exitNotKilled
	}
	return exitOK
}

// mutateAll applies each mutation in turn and runs its test, one line of progress each on
// stderr. A mutation whose test command failed its baseline is not run; an error of the copy
// stops the run (interrupted), and the mutations after it are reported not run.
func mutateAll(ctx context.Context, r *Runner, ms []Mutation, broken map[string]string, stderr io.Writer) ([]Result, bool) {
	results := make([]Result, 0, len(ms))
	interrupted := false
	for i, m := range ms {
		if interrupted {
			results = append(results, Result{M: m, Status: NotRun, Detail: "the run was interrupted"})
			continue
		}
		if why, bad := broken[m.Command]; bad {
			results = append(results, Result{M: m, Status: Baseline, Detail: why})
			fmt.Fprintf(stderr, "[%d/%d] %s: %s (%s)\n", i+1, len(ms), m.Name, Baseline, why)
			continue
		}
		fmt.Fprintf(stderr, "[%d/%d] %s (%s) ...\n", i+1, len(ms), m.Name, m.File)
		res, err := r.Mutate(ctx, m, fmt.Sprintf("%03d-%s", i+1, m.Name))
		if err != nil {
			if ctx.Err() == nil {
				// The copy may be in an unknown state: stop here.
				fmt.Fprintf(stderr, "mutate: %s: %v\n", m.Name, err)
			}
			interrupted = true
			results = append(results, Result{M: m, Status: NotRun, Detail: "the run was interrupted"})
			continue
		}
		results = append(results, res)
		fmt.Fprintf(stderr, "[%d/%d] %s: %s (%s)\n", i+1, len(ms), m.Name, verdictText(res), res.Took.Round(time.Second))
	}
	return results, interrupted
}

// runBaselines runs each distinct test command once without a mutation and records, in
// broken, the commands that fail.
func runBaselines(ctx context.Context, r *Runner, ms []Mutation, broken map[string]string, stderr io.Writer) error {
	var cmds []string
	seen := map[string]bool{}
	for _, m := range ms {
		if !seen[m.Command] {
			seen[m.Command] = true
			cmds = append(cmds, m.Command)
		}
	}
	for i, c := range cmds {
		fmt.Fprintf(stderr, "baseline [%d/%d] %s ...\n", i+1, len(cmds), c)
		out, run, err := r.Exec(ctx, fmt.Sprintf("baseline-%03d", i+1), c)
		if err != nil {
			return err
		}
		if run.Interrupted {
			return errors.New("interrupted")
		}
		if run.TimedOut || run.ExitCode != 0 {
			why := fmt.Sprintf("the command fails without the mutation (exit %d", run.ExitCode)
			if ks := FailingTests(out); len(ks) > 0 {
				why += ": " + strings.Join(ks, "; ")
			}
			broken[c] = why + ")"
			fmt.Fprintf(stderr, "baseline [%d/%d] FAILS: %s\n", i+1, len(cmds), broken[c])
			continue
		}
		fmt.Fprintf(stderr, "baseline [%d/%d] passes (%s)\n", i+1, len(cmds), run.Took.Round(time.Second))
	}
	return nil
}

func shortHash(h string) string {
	h = strings.TrimSpace(h)
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
