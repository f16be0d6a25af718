//go:build unix

package runner

import (
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group, so a terminal's Ctrl-C (sent to the
// foreground group) reaches only the runner, which forwards it once. Terraform treats a second
// interrupt as "exit immediately", which can leave the state lock held.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
