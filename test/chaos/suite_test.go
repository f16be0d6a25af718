package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

var (
	env *envtest.Env
	k8s client.Client
	ctx context.Context
	kit *envtest.Kit
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Crashes, racing managers and starved caches (envtest)")
}

// Managers are started per spec (startManager, newManager), never for the whole suite.
var _ = envtest.RegisterSuite(envtest.SuiteOptions{
	ClusterAPI: true, Log: true,
	EventuallyTimeout: 30 * time.Second, PollingInterval: 100 * time.Millisecond, ConsistentlyDuration: 2 * time.Second,
}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	kit = &envtest.Kit{Ctx: ctx, Client: k8s, Prefix: "chaos"}
})

// running is a manager started by a test; Stop ends it and waits until it has returned.
type running struct {
	cancel context.CancelFunc
	// exited is closed when the manager's Start has returned, with its error in err.
	exited chan struct{}
	stale  *stalecache.Reader
	once   sync.Once
	err    error
}

// Stop cancels the manager and waits until it has returned; it may be called again.
func (r *running) Stop() error {
	r.once.Do(r.cancel)
	<-r.exited
	return r.err
}

// managerOpts says how a test manager is built.
type managerOpts struct {
	cfg       *rest.Config
	clock     clock.Clock
	intercept *interceptor.Funcs
	withStale bool
	// staleEvents wires the stale double to the cache's events (stalecache.Reader.Informing):
	// it never serves an object older than the version whose event was delivered, as a real
	// informer cannot.
	staleEvents bool
	syncTimeout time.Duration
	disableGate bool
	// concurrency is the workers per controller (default 2); stateBackups the state backups
	// each object keeps (default 0: none).
	concurrency  int
	stateBackups int
	// built, when set, sees the manager after it was built and before it starts (the stale
	// double is in place by then).
	built func(*running)
	// logger, when set, replaces the suite's logger for the manager (the soak discards the
	// logs of thousands of passes).
	logger *logr.Logger
}

// startManager builds a manager exactly as the product does (setup.New) and runs it; the spec
// fails if it cannot be built, and the manager is stopped when the spec ends.
func startManager(o managerOpts) *running {
	GinkgoHelper()
	r, err := newManager(o)
	Expect(err).NotTo(HaveOccurred())
	// A failing spec must not leave its managers running into the next one.
	DeferCleanup(func() { _ = r.Stop() })
	return r
}

// newManager builds a manager exactly as the product does (setup.New) and runs it until Stop.
// It uses no Ginkgo, so the soak can restart crashed managers from its own goroutines.
func newManager(o managerOpts) (*running, error) {
	cfg := o.cfg
	if cfg == nil {
		cfg = env.Config
	}
	// The product's manager gets client-go's defaults raised by ctrl.GetConfig; envtest's config
	// has none, and client-side throttling at 5 QPS would measure the limiter, not the manager.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	concurrency := o.concurrency
	if concurrency == 0 {
		concurrency = 2
	}
	r := &running{exited: make(chan struct{})}
	mctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	mgr, err := setup.New(cfg, setup.Options{MetricsAddr: "0", ProbeAddr: "0", Concurrency: concurrency, Clock: o.clock,
		DisableClusterOperationGate: o.disableGate, StateBackups: o.stateBackups,
		RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test"},
		func(mo *manager.Options) {
			skip := true
			mo.Controller.SkipNameValidation = &skip
			if o.logger != nil {
				mo.Logger = *o.logger
			}
			if o.syncTimeout > 0 {
				mo.Controller.CacheSyncTimeout = o.syncTimeout
			}
			if o.staleEvents {
				mo.NewCache = func(cfg *rest.Config, co cache.Options) (cache.Cache, error) {
					c, err := cache.New(cfg, co)
					if err != nil {
						return nil, err
					}
					r.stale = stalecache.Wrap(c, co.Scheme)
					return r.stale.Informing(c), nil
				}
			}
			mo.NewClient = func(cfg *rest.Config, co client.Options) (client.Client, error) {
				if o.withStale {
					if r.stale == nil {
						r.stale = stalecache.Wrap(co.Cache.Reader, co.Scheme)
					}
					co.Cache.Reader = r.stale
				}
				c, err := client.NewWithWatch(cfg, co)
				if err != nil {
					return nil, err
				}
				if o.intercept != nil {
					return interceptor.NewClient(c, *o.intercept), nil
				}
				return c, nil
			}
		})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("build manager: %w", err)
	}
	if o.built != nil {
		o.built(r)
	}
	go func() {
		r.err = mgr.Start(mctx)
		close(r.exited)
	}()
	return r, nil
}

var errCrashed = errors.New("manager crashed")
