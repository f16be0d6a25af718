package main

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := newRootCommand(streams)
	err := cmd.Execute()
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
