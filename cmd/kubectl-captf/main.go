package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := newRootCommand(streams)
	// An interrupt ends the command's context: status --watch then ends with its last report's
	// exit code; other verbs stop their requests.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err == nil {
		return
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(streams.ErrOut, ex.msg)
		}
		os.Exit(ex.code)
	}
	fmt.Fprintln(streams.ErrOut, "error: "+err.Error())
	os.Exit(exitFailed)
}
