//go:build linux

package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// helperEnv turns the test binary into a helper process that starts children and then waits
// to be killed by the test.
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper starts children as the mode says, prints "pids <pid>..." and waits to be killed.
func helper(mode string) int {
	var pids []int
	switch mode {
	case "pdeathsig":
		// Started through Start with the parent-death signal, and no guard.
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = SessionAttrs()
		if err := Start(cmd); err != nil {
			fmt.Println("error", err)
			return 1
		}
		pids = append(pids, cmd.Process.Pid)
	case "guard":
		if err := EnableGuard(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		// As envtest starts etcd: a process group of its own, no parent-death signal, not
		// registered: only the guard's look at the children finds it.
		group := exec.Command("sleep", "300")
		group.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := group.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if !waitGuarded(group.Process.Pid, 10*time.Second) {
			fmt.Println("error the guard never recorded", group.Process.Pid)
			return 1
		}
		// As a container: a session whose first process started a process in a process group
		// of its own (terraform does that); no parent-death signal, so only the guard stops it.
		session := exec.Command(os.Args[0])
		session.Env = append(os.Environ(), helperEnv+"=session-leader")
		session.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := Start(session); err != nil {
			fmt.Println("error", err)
			return 1
		}
		RemoveOnExit(os.Getenv("PROC_TEST_REMOVE"))
		kept := os.Getenv("PROC_TEST_KEEP")
		RemoveOnExit(kept)
		KeepOnExit(kept)
		pids = append(pids, group.Process.Pid, session.Process.Pid)
	case "session-leader":
		// Terraform's way: a child in a process group of its own, inside this session.
		child := exec.Command("sleep", "300")
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := child.Start(); err != nil {
			return 1
		}
		if err := os.WriteFile(os.Getenv("PROC_TEST_MARKER"), []byte(strconv.Itoa(child.Process.Pid)), 0o600); err != nil {
			return 1
		}
		select {}
	default:
		fmt.Println("error unknown mode", mode)
		return 1
	}
	fmt.Println("pids", strings.Trim(fmt.Sprint(pids), "[]"))
	select {}
}

// startHelper runs the test binary as a helper and returns it with the pids it printed.
func startHelper(t *testing.T, mode string, env ...string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "pids "); ok {
			var pids []int
			for _, f := range strings.Fields(v) {
				p, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, p)
			}
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, pids
		}
		t.Fatalf("helper: %s", line)
	}
	t.Fatalf("helper ended without pids: %v", sc.Err())
	return nil, nil
}

func alive(pid int) bool {
	s, ok := readStat(pid)
	return ok && s.live()
}

// A child started by Start from a goroutine whose thread then ends keeps running: the
// parent-death signal is tied to the spawner's thread, which lives as long as the process.
func TestAChildOutlivesTheThreadThatAskedForIt(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = SessionAttrs()
	// The main thread never ends (the runtime parks it instead): a goroutine that lands on it
	// keeps it busy until the test ends, and the next one gets another thread.
	release := make(chan struct{})
	defer close(release)
	tid := 0
	for attempt := 0; attempt < 10 && tid == 0; attempt++ {
		tids := make(chan int, 1)
		errs := make(chan error, 1)
		go func() {
			// Locked and never unlocked: the runtime ends this thread when the goroutine returns.
			runtime.LockOSThread()
			if syscall.Gettid() == os.Getpid() {
				tids <- 0
				<-release
				runtime.UnlockOSThread()
				return
			}
			tids <- syscall.Gettid()
			errs <- Start(cmd)
		}()
		if tid = <-tids; tid != 0 {
			g.Expect(<-errs).To(Succeed())
		}
	}
	g.Expect(tid).NotTo(BeZero(), "no goroutine got a thread of its own")
	t.Cleanup(func() { _ = KillSession(cmd.Process.Pid); _ = cmd.Wait() })
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	g.Eventually(func() bool {
		_, err := os.Stat(filepath.Join("/proc/self/task", strconv.Itoa(tid)))
		return os.IsNotExist(err)
	}).WithTimeout(10*time.Second).Should(BeTrue(), "the asking thread ended")
	g.Consistently(exited).WithTimeout(time.Second).ShouldNot(BeClosed(), "the child was killed when the asking thread ended")
}

// A child started with SessionAttrs dies when the process that started it is killed.
func TestAChildDiesWithItsParent(t *testing.T) {
	g := NewWithT(t)
	helper, pids := startHelper(t, "pdeathsig")
	g.Expect(pids).To(HaveLen(1))
	g.Expect(alive(pids[0])).To(BeTrue())
	g.Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = helper.Wait()
	g.Eventually(func() bool { return alive(pids[0]) }).WithTimeout(10*time.Second).Should(BeFalse(),
		"the child of a killed process is still running")
}

// The guard kills what a killed process left: a child in a process group of its own that it
// found by itself, and a whole session including a process that made its own process group;
// it removes the paths registered for removal and keeps the withdrawn one.
func TestTheGuardKillsWhatAKilledProcessLeft(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	marker, remove, keep := filepath.Join(dir, "grandchild.pid"), filepath.Join(dir, "remove"), filepath.Join(dir, "keep")
	for _, d := range []string{remove, keep} {
		g.Expect(os.MkdirAll(filepath.Join(d, "sub"), 0o700)).To(Succeed())
	}
	helper, pids := startHelper(t, "guard", "PROC_TEST_MARKER="+marker, "PROC_TEST_REMOVE="+remove, "PROC_TEST_KEEP="+keep)
	g.Expect(pids).To(HaveLen(2))
	var grandchild int
	g.Eventually(func() error {
		b, err := os.ReadFile(marker)
		if err != nil {
			return err
		}
		grandchild, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())
	st, ok := readStat(grandchild)
	g.Expect(ok).To(BeTrue())
	g.Expect(st.session).To(Equal(pids[1]), "the grandchild is in the container's session")
	g.Expect(st.pgrp).NotTo(Equal(pids[1]), "the grandchild made a process group of its own")
	all := append(pids, grandchild)
	for _, p := range all {
		g.Expect(alive(p)).To(BeTrue(), "pid %d", p)
	}

	g.Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = helper.Wait()
	for _, p := range all {
		g.Eventually(func() bool { return alive(p) }).WithTimeout(15*time.Second).Should(BeFalse(), "pid %d survived its killed parent", p)
	}
	g.Eventually(func() bool { _, err := os.Stat(remove); return os.IsNotExist(err) }).WithTimeout(10 * time.Second).Should(BeTrue())
	_, err := os.Stat(keep)
	g.Expect(err).NotTo(HaveOccurred(), "a withdrawn path stays")
}

func TestParseStatReadsFieldsAfterTheCommand(t *testing.T) {
	g := NewWithT(t)
	raw := []byte("42 (a (weird) name) S 1 40 39 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10")
	s, ok := parseStat(raw)
	g.Expect(ok).To(BeTrue())
	g.Expect(s).To(Equal(stat{state: 'S', ppid: 1, pgrp: 40, session: 39, start: 123456}))
	_, ok = parseStat([]byte("42 (x) S 1"))
	g.Expect(ok).To(BeFalse())
}

// A recorded pid now held by another process (another start time) is never killed, nor its
// session or process group.
func TestTheGuardSparesAReusedPid(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = KillSession(cmd.Process.Pid); _ = cmd.Wait() })
	now, ok := readStat(cmd.Process.Pid)
	g.Expect(ok).To(BeTrue())
	g.Expect(now.session).To(Equal(cmd.Process.Pid))
	earlier := now
	earlier.start--
	gd := &guard{self: os.Getpid(), procs: map[int]stat{cmd.Process.Pid: earlier}}
	g.Expect(gd.leftovers()).To(BeEmpty())
	gd.procs[cmd.Process.Pid] = now
	g.Expect(gd.leftovers()).To(ConsistOf(cmd.Process.Pid))
}

// A child the guard first read between its fork and its setsid (with the sandbox's session and
// group) is read again when Start registers it: once it died, the processes of the session it
// led are still killed. (CI once left a container's terraform-like child alive after a SIGKILL
// of the sandbox: the look for children had recorded the container before its setsid.)
func TestTheGuardKeepsTheSessionAChildLedAfterItsFirstLook(t *testing.T) {
	g := NewWithT(t)
	marker := filepath.Join(t.TempDir(), "child")
	leader := exec.Command(os.Args[0])
	leader.Env = append(os.Environ(), helperEnv+"=session-leader", "PROC_TEST_MARKER="+marker)
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	g.Expect(leader.Start()).To(Succeed())
	var child int
	t.Cleanup(func() {
		_ = KillSession(leader.Process.Pid)
		if child > 0 {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	g.Eventually(func() error {
		b, err := os.ReadFile(marker)
		if err == nil {
			child, err = strconv.Atoi(string(b))
		}
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())

	now, ok := readStat(leader.Process.Pid)
	g.Expect(ok).To(BeTrue())
	g.Expect(now.session).To(Equal(leader.Process.Pid))
	ours, ok := readStat(os.Getpid())
	g.Expect(ok).To(BeTrue())
	beforeSetsid := now
	beforeSetsid.session, beforeSetsid.pgrp = ours.session, ours.pgrp
	gd := &guard{self: os.Getpid(), procs: map[int]stat{leader.Process.Pid: beforeSetsid}}

	gd.record(leader.Process.Pid) // Start's registration, after the exec
	g.Expect(syscall.Kill(leader.Process.Pid, syscall.SIGKILL)).To(Succeed())
	_ = leader.Wait()
	g.Expect(gd.leftovers()).To(ConsistOf(child), "the session's other process outlives its leader")
}

// BenchmarkGuardPoll measures one look of the guard for new children of a process (this test
// binary, with its threads): the cost paid every 100 ms while children come, every 2 s after.
func BenchmarkGuardPoll(b *testing.B) {
	g := &guard{parent: os.Getpid(), self: -1, procs: map[int]stat{}, paths: map[string]bool{}}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = devnull // the guard acknowledges what it records on its stdout
	defer func() { os.Stdout = stdout; _ = devnull.Close() }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.adoptChildren()
	}
	b.StopTimer()
	threads, _ := filepath.Glob("/proc/self/task/*")
	b.ReportMetric(float64(len(threads)), "threads")
	if _, ok := g.procs[cmd.Process.Pid]; !ok {
		b.Fatal("the child was not found")
	}
}
