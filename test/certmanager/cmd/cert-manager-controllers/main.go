package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// options are the program's flags.
type options struct {
	kubeconfig               string
	clusterResourceNamespace string
	workers                  int
	verbosity                int
}

// stopGrace bounds how long the controllers may take to stop once asked.
const stopGrace = 20 * time.Second

// parentPoll is how often the program looks whether its parent is still the one that started it.
const parentPoll = 500 * time.Millisecond

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controllers:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	log := zap.New(zap.UseDevMode(false), zap.Level(zapcore.Level(-o.verbosity)))
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	logf.Log = log.WithName("cert-manager")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go stopWithParent(ctx, cancel, log)
	ctx = logf.NewContext(ctx, logf.Log)

	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs <- runControllers(ctx, o) })
	wg.Go(func() { errs <- runInjector(ctx, o) })

	// The first of the two to end (an error, or the context's end) ends the other.
	first := <-errs
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		return errors.New("the controllers did not stop within the grace period")
	}
	second := <-errs
	log.Info("stopped")
	return errors.Join(first, second)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("cert-manager-controllers", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server to run against (required)")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers refer to")
	fs.IntVar(&o.workers, "workers", 2, "workers per controller")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity (0 logs state changes and errors)")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("parse flags: %w", err)
	}
	if o.kubeconfig == "" {
		return o, errors.New("--kubeconfig is required")
	}
	if o.workers < 1 {
		return o, errors.New("--workers must be at least 1")
	}
	return o, nil
}

// stopWithParent cancels the program once its parent process is gone: the kernel then gives
// the program another parent, so its parent process id changes.
func stopWithParent(ctx context.Context, cancel context.CancelFunc, log logr.Logger) {
	parent := os.Getppid()
	tick := time.NewTicker(parentPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if os.Getppid() != parent {
				log.Info("parent process is gone, stopping", "parent", parent)
				cancel()
				return
			}
		}
	}
}
