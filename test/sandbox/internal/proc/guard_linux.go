//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// guardEnv, set to the sandbox's pid, turns a re-executed binary into the guard.
const guardEnv = "CAPTF_SANDBOX_GUARD_FOR"

// The guard looks for new children of the sandbox every guardPoll while children come and go
// (within guardBusy of the last new one, or of the start), every guardIdlePoll otherwise: fast
// when envtest starts etcd and kube-apiserver, cheap while the sandbox idles.
const (
	guardPoll     = 100 * time.Millisecond
	guardIdlePoll = 2 * time.Second
	guardBusy     = 10 * time.Second
)

// killTimeout bounds how long the guard keeps killing what is left.
const killTimeout = 10 * time.Second

func init() {
	if v := os.Getenv(guardEnv); v != "" {
		os.Exit(runGuard(v))
	}
}

// guardClient is the sandbox's end of the guard's pipe.
var guardClient struct {
	mu  sync.Mutex
	w   *os.File
	cmd *exec.Cmd
	// acks is closed when the guard's output ends; adopted holds the pids it recorded.
	acks    chan struct{}
	adopted map[int]bool
	changed *sync.Cond
}

// EnableGuard starts the guard for this process unless it runs. From then on, every process
// Start starts and every other child of this process is killed when this process exits, however
// it exits.
func EnableGuard() error {
	guardClient.mu.Lock()
	defer guardClient.mu.Unlock()
	if guardClient.w != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start the guard: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"captf-sandbox-guard"}
	cmd.Env = []string{guardEnv + "=" + strconv.Itoa(os.Getpid())}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	ackR, ackW, err := os.Pipe()
	if err != nil {
		_, _ = r.Close(), w.Close()
		return fmt.Errorf("start the guard: %w", err)
	}
	cmd.Stdout = ackW
	// A process group of its own: Ctrl-C in the terminal reaches the sandbox, not the guard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_, _ = r.Close(), ackW.Close()
	if err != nil {
		_, _ = w.Close(), ackR.Close()
		return fmt.Errorf("start the guard: %w", err)
	}
	guardClient.w, guardClient.cmd = w, cmd
	guardClient.acks, guardClient.adopted = make(chan struct{}), map[int]bool{}
	if guardClient.changed == nil {
		guardClient.changed = sync.NewCond(&guardClient.mu)
	}
	go readAcks(ackR, guardClient.acks)
	return nil
}

// readAcks records the "adopted <pid>" lines the guard writes for each process it records.
func readAcks(r *os.File, done chan struct{}) {
	defer close(done)
	defer func() { _ = r.Close() }()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "adopted "); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				guardClient.mu.Lock()
				guardClient.adopted[pid] = true
				guardClient.changed.Broadcast()
				guardClient.mu.Unlock()
			}
		}
	}
}

// GuardChildren waits until the guard has recorded every current child of this process (it
// looks for new children every 100 ms while they come, every 2 s once none came for 10 s),
// so children started by code that does not use Start
// (envtest's etcd and kube-apiserver) are known to be guarded from a known point on. Without a
// guard it returns at once.
func GuardChildren(timeout time.Duration) error {
	guardClient.mu.Lock()
	var guardPid int
	if guardClient.cmd != nil {
		guardPid = guardClient.cmd.Process.Pid
	}
	guardClient.mu.Unlock()
	if guardPid == 0 {
		return nil
	}
	for _, pid := range childrenOf(os.Getpid()) {
		if s, ok := readStat(pid); pid == guardPid || !ok || !s.live() {
			continue
		}
		if !waitGuarded(pid, timeout) {
			return fmt.Errorf("the guard did not record child %d within %s", pid, timeout)
		}
	}
	return nil
}

// childrenOf lists the children of every thread of process pid.
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// waitGuarded waits until the guard reported pid recorded (true), or pid ended (true: nothing
// to guard), or timeout (false).
func waitGuarded(pid int, timeout time.Duration) bool {
	guardClient.mu.Lock()
	defer guardClient.mu.Unlock()
	if guardClient.changed == nil {
		return false
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Wake the waiter now and then to look at the deadline and at the process.
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				guardClient.mu.Lock()
				guardClient.changed.Broadcast()
				guardClient.mu.Unlock()
			}
		}
	}()
	deadline := time.Now().Add(timeout)
	for !guardClient.adopted[pid] {
		if s, ok := readStat(pid); !ok || !s.live() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		guardClient.changed.Wait()
	}
	return true
}

// StopGuard closes the guard's pipe and waits until the guard has killed whatever of this
// process's children is left (nothing, after a clean stop) and exited. A binary calls it last.
func StopGuard() {
	guardClient.mu.Lock()
	defer guardClient.mu.Unlock()
	if guardClient.w == nil {
		return
	}
	_ = guardClient.w.Close()
	acks := guardClient.acks
	guardClient.mu.Unlock()
	<-acks // the guard's output ends when it exits
	guardClient.mu.Lock()
	_ = guardClient.cmd.Wait()
	guardClient.w, guardClient.cmd = nil, nil
}

// RemoveOnExit asks the guard to remove path (recursively) if this process dies without
// calling KeepOnExit for it first. Without a guard it does nothing.
func RemoveOnExit(path string) { tell("path", path) }

// KeepOnExit withdraws a RemoveOnExit.
func KeepOnExit(path string) { tell("keep", path) }

func registerPid(pid int) { tell("pid", strconv.Itoa(pid)) }

func tell(verb, arg string) {
	guardClient.mu.Lock()
	defer guardClient.mu.Unlock()
	if guardClient.w == nil || strings.ContainsAny(arg, "\n") {
		return
	}
	_, _ = guardClient.w.WriteString(verb + " " + arg + "\n")
}

// guard is the guard process's state.
type guard struct {
	parent int
	self   int
	// procs are the recorded children: pid -> the process as recorded.
	procs map[int]stat
	paths map[string]bool
	// lastNew is when the guard last learnt of a new child.
	lastNew time.Time
}

func runGuard(parent string) int {
	// Nothing but the end of the pipe ends the guard (and SIGKILL, which nobody sends it).
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	ppid, err := strconv.Atoi(parent)
	if err != nil {
		fmt.Fprintf(os.Stderr, "captf-sandbox-guard: bad parent %q\n", parent)
		return 2
	}
	g := &guard{parent: ppid, self: os.Getpid(), procs: map[int]stat{}, paths: map[string]bool{}}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	g.lastNew = time.Now()
	tick := time.NewTimer(guardPoll)
	defer tick.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return g.cleanUp()
			}
			g.handle(l)
		case <-tick.C:
			if os.Getppid() == g.parent {
				g.adoptChildren()
			}
			next := guardPoll
			if time.Since(g.lastNew) > guardBusy {
				next = guardIdlePoll
			}
			tick.Reset(next)
		}
	}
}

func (g *guard) handle(line string) {
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "pid":
		if pid, err := strconv.Atoi(arg); err == nil {
			g.record(pid)
		}
	case "path":
		g.paths[arg] = true
	case "keep":
		delete(g.paths, arg)
	}
}

// record remembers a process (not the guard itself). A process it knows already (the same start
// time) is looked at again and its session and process group are updated: the look for
// children can read a child between its fork and its setsid or setpgid, when it still has the
// sandbox's session and group, and the session it then leads is what cleanUp must kill after
// the child itself died (a container killed by its parent-death signal, whose processes live
// on in its session).
func (g *guard) record(pid int) {
	if pid == g.self {
		return
	}
	s, ok := readStat(pid)
	if !ok {
		return
	}
	if old, known := g.procs[pid]; known && old.start == s.start {
		if s.session != old.session || s.pgrp != old.pgrp {
			g.procs[pid] = s
		}
		return
	}
	g.procs[pid] = s
	g.lastNew = time.Now()
	fmt.Printf("adopted %d\n", pid)
}

// adoptChildren records every current child of the sandbox.
func (g *guard) adoptChildren() {
	for _, pid := range childrenOf(g.parent) {
		g.record(pid)
	}
}

// cleanUp runs once the sandbox is gone: it kills every recorded process still alive (the
// same process: same start time), every process of the sessions and process groups they led,
// then removes the registered paths.
func (g *guard) cleanUp() int {
	deadline := time.Now().Add(killTimeout)
	killed := map[int]bool{}
	for {
		targets := g.leftovers()
		if len(targets) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "captf-sandbox-guard: processes %v survive SIGKILL\n", targets)
			break
		}
		for _, pid := range targets {
			killed[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond) // let the kernel reap them before looking again
	}
	var errs []error
	for p := range g.paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(killed) > 0 {
		fmt.Fprintf(os.Stderr, "captf-sandbox-guard: the sandbox (pid %d) ended without stopping its children; killed %d processes it left\n", g.parent, len(killed))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "captf-sandbox-guard: %v\n", err)
		return 1
	}
	return 0
}

// leftovers lists the live processes the guard must kill: recorded processes that are still
// the same process, and members of the sessions and process groups recorded processes led. A
// pid that leads a live session or group is never reused, so a member of such a session or
// group belongs to the recorded process even when that process itself is gone. A recorded pid
// now held by another process (another start time) is skipped, with its session and group.
func (g *guard) leftovers() []int {
	sessions, groups := map[int]bool{}, map[int]bool{}
	out := map[int]bool{}
	for pid, rec := range g.procs {
		now, alive := readStat(pid)
		if alive && now.start != rec.start {
			continue // reused
		}
		if alive && now.live() {
			out[pid] = true
			if now.session == pid {
				sessions[pid] = true
			}
			if now.pgrp == pid {
				groups[pid] = true
			}
		}
		if rec.session == pid {
			sessions[pid] = true
		}
		if rec.pgrp == pid {
			groups[pid] = true
		}
	}
	if len(sessions)+len(groups) > 0 {
		pids, _ := allPids()
		for _, pid := range pids {
			if pid == g.self {
				continue
			}
			s, ok := readStat(pid)
			if ok && s.live() && (sessions[s.session] || groups[s.pgrp]) {
				out[pid] = true
			}
		}
	}
	list := make([]int, 0, len(out))
	for pid := range out {
		list = append(list, pid)
	}
	return list
}
