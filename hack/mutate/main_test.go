package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo turns the module of module() into a git repository with a mutation list of three
// mutations: one killed, one surviving, one left out by -only in some runs.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := module(t)
	list := "# name: rule-check\n" +
		`rule/rule.go|\tif running {\n\t\treturn false\n\t}\n||go test ./rule/ -run TestAllowedRefusesWhileRunning -count=1` + "\n" +
		"# name: rule-untested\n" +
		"rule/rule.go|return 1 }|return 2 }|go test ./rule/ -run TestAllowedRefusesWhileRunning -count=1\n"
	if err := os.MkdirAll(filepath.Join(dir, "hack/mutations"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack/mutations/rule.txt"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "one"}} {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// snapshot reads every file of the working tree but .git.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRunReportsEachMutationLeavesTheTreeAloneAndRemovesTheCopy(t *testing.T) {
	repo := gitRepo(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("MUTATIONS", "")
	report := filepath.Join(t.TempDir(), "report.md")
	before := snapshot(t, repo)

	var stdout, stderr bytes.Buffer
	code := run([]string{"-repo", repo, "-report", report}, &stdout, &stderr)
	if code != exitNotKilled {
		t.Fatalf("exit %d, want %d (one mutation survives)\nstdout:\n%s\nstderr:\n%s", code, exitNotKilled, &stdout, &stderr)
	}
	for _, want := range []string{"| rule-check | rule/rule.go | TestAllowedRefusesWhileRunning |", "| rule-untested | rule/rule.go | SURVIVED |",
		"2 mutation(s): 1 killed, 1 survived"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, &stdout)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, scratchPattern+"*")); len(left) != 0 {
		t.Errorf("scratch copies left behind: %q", left)
	}
	after := snapshot(t, repo)
	if len(after) != len(before) {
		t.Errorf("the working tree has %d files after the run, %d before", len(after), len(before))
	}
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed in the working tree", p)
		}
	}

	// A subset: the report names what it left out and how to run it.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-repo", repo, "-only", "rule-check", "-baseline=false", "-report", report}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- command: `bin/mutate -repo " + repo + " -only rule-check -baseline=false -report " + report + "`",
		"| rule-check | rule/rule.go | TestAllowedRefusesWhileRunning |", "## Not run in this report",
		"`make mutate MUTATIONS='rule-untested'`", "| rule-untested | rule.txt:4 | rule/rule.go |", "- baseline: not run"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestShellQuoteRoundTripsThroughBash(t *testing.T) {
	args := []string{"-only", "decide/*, guard-*", "-report", "docs/x.md", "it's", ""}
	line := shellQuote(args)
	got, err := exec.Command("bash", "-c", `f() { for a in "$@"; do printf '[%s]' "$a"; done; }; f `+line).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "[-only][decide/*, guard-*][-report][docs/x.md][it's][]"
	if string(got) != want {
		t.Fatalf("bash read %s as %s, want %s", line, got, want)
	}
}
