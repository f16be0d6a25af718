//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SessionAttrs starts a container's first process in a session of its own, so every process
// it starts (terraform puts itself in its own process group) stays findable by session id, and
// with the parent-death signal, so it dies with the sandbox (Start makes that signal reliable).
func SessionAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawns    chan spawnRequest
)

// Start starts cmd from the spawner: one goroutine locked to its OS thread for the life of the
// process, so a parent-death signal set in cmd.SysProcAttr fires when the sandbox ends and never
// earlier (the kernel ties it to the creating thread). The started process is registered with
// the guard when one runs.
func Start(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnRequest)
		go func() {
			// Never unlocked, never returns: the thread lives as long as the process.
			runtime.LockOSThread()
			for r := range spawns {
				r.done <- r.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawns <- req
	if err := <-req.done; err != nil {
		return err
	}
	registerPid(cmd.Process.Pid)
	return nil
}

// stat is what the guard and KillSession read from /proc/<pid>/stat.
type stat struct {
	state   byte
	ppid    int
	pgrp    int
	session int
	// start is the process's start time in clock ticks since boot: with the pid, it names one
	// process even after the pid is reused.
	start uint64
}

// readStat reads /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (stat, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(raw)
}

// parseStat parses "pid (comm) state ppid pgrp session ... starttime ..."; comm may hold spaces
// and parentheses, so fields are counted after the last ')'.
func parseStat(raw []byte) (stat, bool) {
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return stat{}, false
	}
	f := bytes.Fields(raw[end+1:])
	// f[0] is field 3 (state); starttime is field 22, so f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, false
	}
	var s stat
	var err error
	s.state = f[0][0]
	if s.ppid, err = strconv.Atoi(string(f[1])); err != nil {
		return stat{}, false
	}
	if s.pgrp, err = strconv.Atoi(string(f[2])); err != nil {
		return stat{}, false
	}
	if s.session, err = strconv.Atoi(string(f[3])); err != nil {
		return stat{}, false
	}
	if s.start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return stat{}, false
	}
	return s, true
}

// live reports whether a stat is of a running (not zombie, not dead) process.
func (s stat) live() bool { return s.state != 'Z' && s.state != 'X' }

// allPids lists the numeric entries of /proc.
func allPids() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// members lists the live processes whose session (or process group, when group is true) is id.
func members(id int, group bool) ([]int, error) {
	pids, err := allPids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		s, ok := readStat(pid)
		if !ok || !s.live() {
			continue
		}
		if (group && s.pgrp == id) || (!group && s.session == id) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// KillSession sends SIGKILL to every process of session sid until none is left: what a
// container runtime does to a container's processes when it stops the container.
func KillSession(sid int) error {
	return killAll(sid, false)
}

func killAll(id int, group bool) error {
	for i := 0; i < 200; i++ {
		pids, err := members(id, group)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond) // let the kernel reap what was killed before looking again
	}
	what := "session"
	if group {
		what = "process group"
	}
	return fmt.Errorf("processes of %s %d survive SIGKILL", what, id)
}
