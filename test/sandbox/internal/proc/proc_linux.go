//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// SessionAttrs starts a container's first process in a session of its own, so every process
// it starts (terraform puts itself in its own process group) stays findable by session id,
// and dies with the executor.
func SessionAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// sessionMembers lists the live (not zombie) processes of session sid.
func sessionMembers(sid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
		end := bytes.LastIndexByte(raw, ')')
		if end < 0 {
			continue
		}
		f := bytes.Fields(raw[end+1:])
		if len(f) < 4 || string(f[0]) == "Z" {
			continue
		}
		if s, err := strconv.Atoi(string(f[3])); err == nil && s == sid {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillSession sends SIGKILL to every process of session sid until none is left: what a
// container runtime does to a container's processes when it stops the container.
func KillSession(sid int) error {
	for i := 0; i < 200; i++ {
		pids, err := sessionMembers(sid)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("processes of session %d survive SIGKILL", sid)
}
