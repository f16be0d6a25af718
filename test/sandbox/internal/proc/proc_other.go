//go:build !linux

package proc

import (
	"os/exec"
	"syscall"
)

// SessionAttrs starts a container's first process in a process group of its own. Outside
// Linux, processes that leave that group (terraform starts its own) are not tracked, and
// children do not die with the sandbox when it is killed.
func SessionAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// Start starts cmd.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// KillSession kills the process group sid.
func KillSession(sid int) error {
	if err := syscall.Kill(-sid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// EnableGuard does nothing outside Linux.
func EnableGuard() error { return nil }

// StopGuard does nothing outside Linux.
func StopGuard() {}

// RemoveOnExit does nothing outside Linux.
func RemoveOnExit(string) {}

// KeepOnExit does nothing outside Linux.
func KeepOnExit(string) {}
