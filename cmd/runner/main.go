// Command runner runs inside every CAPTF Job. `runner run` copies the module into a work
// folder, points terraform's backend at the object's state (the http backend on the Job's
// state channel, or the kubernetes backend when run without one), runs the terraform/tofu
// commands of one operation, forwards SIGTERM/SIGINT to them, and writes a small JSON result
// to the termination log. `runner channel` is the state channel, the Job's native sidecar and
// the only holder of a Kubernetes credential. `runner install <dest>` copies the binary (the
// Job's init container). See docs/runner.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/captf/cluster-api-provider-terraform/cmd/runner/internal/runner"
)

func main() {
	// Catch the signals first: a SIGTERM at any point must end in a result, never a silent kill.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(runner.Main(context.Background(), os.Args[1:], os.Environ(), os.Stdout, os.Stderr, signals))
}
