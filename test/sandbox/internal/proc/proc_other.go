//go:build !linux

package proc

import "syscall"

// SessionAttrs starts a container's first process in a process group of its own. Outside
// Linux, processes that leave that group (terraform starts its own) are not tracked.
func SessionAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// KillSession kills the process group sid.
func KillSession(sid int) error {
	if err := syscall.Kill(-sid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
