package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// module writes a tiny Go module with one rule and the test that guards it.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"rule/rule.go": "package rule\n\n// Allowed is the rule under test.\nfunc Allowed(running bool) bool {\n" +
			"\tif running {\n\t\treturn false\n\t}\n\treturn true\n}\n\n// Unused is not tested.\nfunc Unused() int { return 1 }\n",
		"rule/rule_test.go": "package rule\n\nimport \"testing\"\n\nfunc TestAllowedRefusesWhileRunning(t *testing.T) {\n" +
			"\tif Allowed(true) {\n\t\tt.Fatal(\"allowed while running\")\n\t}\n}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMutateKillsSurvivesStaleInvalidAndAlwaysRestores(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is needed:", err)
	}
	dir := module(t)
	r := &Runner{Dir: dir, Env: os.Environ(), Logs: t.TempDir(), Timeout: 5 * time.Minute}
	orig, err := os.ReadFile(filepath.Join(dir, "rule/rule.go"))
	if err != nil {
		t.Fatal(err)
	}
	test := "go test ./rule/ -run TestAllowedRefusesWhileRunning -count=1"
	cases := []struct {
		name   string
		m      Mutation
		status Status
		killer string
	}{
		{"drop the check", Mutation{File: "rule/rule.go", Old: "\tif running {\n\t\treturn false\n\t}\n", New: "", Command: test},
			Killed, "TestAllowedRefusesWhileRunning"},
		{"change untested code", Mutation{File: "rule/rule.go", Old: "return 1 }", New: "return 2 }", Command: test}, Survived, ""},
		{"old text gone", Mutation{File: "rule/rule.go", Old: "if stopped {", New: "if true {", Command: test}, Stale, ""},
		{"old text twice", Mutation{File: "rule/rule.go", Old: "return ", New: "return !", Command: test}, Stale, ""},
		{"file gone", Mutation{File: "rule/gone.go", Old: "x", New: "y", Command: test}, Stale, ""},
		{"does not compile", Mutation{File: "rule/rule.go", Old: "return true", New: "return 1", Command: test}, Invalid, ""},
		{"vet finding is no compile error", Mutation{File: "rule/rule.go", Old: "\treturn true\n}", New: "\treturn true\n\treturn false\n}", Command: test},
			Survived, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.Name = tc.name
			res, err := r.Mutate(context.Background(), tc.m, sanitize(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status {
				t.Fatalf("case %d: status %s (%s %v), want %s", i, res.Status, res.Detail, res.Killers, tc.status)
			}
			if tc.killer != "" && (len(res.Killers) != 1 || res.Killers[0] != tc.killer) {
				t.Fatalf("killers %v, want [%s]", res.Killers, tc.killer)
			}
			now, err := os.ReadFile(filepath.Join(dir, "rule/rule.go"))
			if err != nil {
				t.Fatal(err)
			}
			if string(now) != string(orig) {
				t.Fatalf("the file was not restored:\n%s", now)
			}
		})
	}
}

func TestExecStopsTheWholeProcessGroupWhenInterrupted(t *testing.T) {
	r := &Runner{Dir: t.TempDir(), Env: os.Environ(), Logs: t.TempDir(), Timeout: time.Minute, Grace: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	started := filepath.Join(r.Dir, "started")
	go func() {
		// Cancel once the command runs (it writes the file first).
		for {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	begin := time.Now()
	_, run, err := r.Exec(ctx, "interrupted", "sleep 300 & echo $! > child; touch started; wait")
	if err != nil {
		t.Fatal(err)
	}
	if !run.Interrupted || time.Since(begin) > 30*time.Second {
		t.Fatalf("run %+v after %s, want an interrupted run that ended at once", run, time.Since(begin))
	}
	assertGone(t, filepath.Join(r.Dir, "child"))
}

func TestExecStopsACommandThatOutlivesTheTimeout(t *testing.T) {
	r := &Runner{Dir: t.TempDir(), Env: os.Environ(), Logs: t.TempDir(), Timeout: 500 * time.Millisecond, Grace: time.Second}
	out, run, err := r.Exec(context.Background(), "slow", "trap '' INT; sleep 300 & echo $! > child; wait")
	if err != nil {
		t.Fatal(err)
	}
	if !run.TimedOut {
		t.Fatalf("run %+v, want timed out", run)
	}
	if st, _, _ := Judge(out, run); st != Timeout {
		t.Fatalf("Judge = %s, want %s", st, Timeout)
	}
	assertGone(t, filepath.Join(r.Dir, "child"))
}

// assertGone checks that the process whose PID is in file no longer runs.
func assertGone(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A killed child of the stopped shell is reaped by init; until then it is a zombie,
		// which signal 0 still finds, so look at its state too.
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d of the command's group still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestScratchCopiesHeadOrTheWorktreeAndLinksBin(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write(".gitignore", "/bin/\n")
	write("pkg/a.go", "committed\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	write("pkg/a.go", "changed\n")
	write("pkg/new.go", "untracked\n")
	write("bin/tool", "a tool\n")

	read := func(s *Scratch, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(s.Src, name))
		if err != nil {
			return "<missing>"
		}
		return string(b)
	}
	head, err := NewScratch(context.Background(), "", repo, FromHead)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(head, "../"+ownerFile); got != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("head copy: %s = %q, want this process's PID", ownerFile, got)
	}
	if got := read(head, "pkg/a.go"); got != "committed\n" {
		t.Errorf("head copy: pkg/a.go = %q", got)
	}
	if got := read(head, "pkg/new.go"); got != "<missing>" {
		t.Errorf("head copy holds an untracked file: %q", got)
	}
	if got := read(head, "bin/tool"); got != "a tool\n" {
		t.Errorf("head copy: bin/tool = %q, want the repository's through a link", got)
	}
	// A file a test writes into the copy's bin/ stays in the copy.
	if err := os.WriteFile(filepath.Join(head.Src, "bin", "written"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "bin", "written")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write into the copy's bin/ reached the repository: %v", err)
	}
	wt, err := NewScratch(context.Background(), "", repo, FromWorktree)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(wt, "pkg/a.go") + read(wt, "pkg/new.go"); got != "changed\nuntracked\n" {
		t.Errorf("worktree copy: %q", got)
	}
	for _, s := range []*Scratch{head, wt} {
		if err := s.Remove(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(s.Root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("scratch %s left behind", s.Root)
		}
	}
	if b, err := os.ReadFile(filepath.Join(repo, "pkg/a.go")); err != nil || string(b) != "changed\n" {
		t.Errorf("the working tree changed: %q %v", b, err)
	}
}

func TestSweepStaleRemovesOnlyCopiesOfDeadRuns(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, pid string) string {
		t.Helper()
		root := filepath.Join(dir, scratchPattern+name)
		if err := os.MkdirAll(filepath.Join(root, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(pid+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	stale := mk("dead", strconv.Itoa(dead.Process.Pid))
	live := mk("live", strconv.Itoa(os.Getpid()))
	unowned := mk("unowned", "")
	other := filepath.Join(dir, "not-a-scratch")
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	gone, err := SweepStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != stale {
		t.Fatalf("removed %q, want only %s", gone, stale)
	}
	for _, keep := range []string{live, unowned, other} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}

	// A new scratch copy records its owner, so a later sweep would find it.
	repo := t.TempDir()
	s, err := NewScratch(context.Background(), dir, repo, FromWorktree)
	if err == nil {
		_ = s.Remove()
		t.Fatal("a scratch copy of a folder that is no git repository was made")
	}
	if roots, _ := filepath.Glob(filepath.Join(dir, scratchPattern+"*")); len(roots) != 2 {
		t.Fatalf("a failed NewScratch left a folder behind: %q", roots)
	}
}
