package envtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// SuiteOptions configures RegisterSuite. The zero value starts a control plane with CAPTF's
// CRDs and leaves Gomega's defaults and controller-runtime's logger alone.
type SuiteOptions struct {
	// Options configures the control plane (extra CRDs, webhooks).
	Options
	// ClusterAPI installs Cluster API's CRDs too (StartWithClusterAPI).
	ClusterAPI bool
	// Log sends controller-runtime's log (the manager's, when a suite starts one) to GinkgoWriter,
	// which go test -v and a failing spec show.
	Log bool
	// Configure, when set, completes Options in BeforeSuite before the control plane starts: for
	// options that need work first (rendering webhook configurations).
	Configure func(*Options)
	// EventuallyTimeout, PollingInterval and ConsistentlyDuration set Gomega's defaults when not 0.
	EventuallyTimeout, PollingInterval, ConsistentlyDuration time.Duration
}

// Suite is what RegisterSuite gives a Ginkgo suite: its control plane, an administrator client
// (uncached: every read is live) and a context that ends when the suite does.
type Suite struct {
	Env    *Env
	Client client.Client
	Ctx    context.Context

	cancel context.CancelFunc
	after  []func()
}

// Defer adds fn to what the suite runs in AfterSuite, last added first, after the suite's context
// is cancelled and before the control plane stops: where a suite stops the managers it started.
func (s *Suite) Defer(fn func()) { s.after = append(s.after, fn) }

// ManagerStopTimeout is how long AfterSuite waits for a manager StartManager started to return.
const ManagerStopTimeout = time.Minute

// StartManager runs mgr until the suite's context ends, and makes AfterSuite wait for it to
// return without an error (ManagerStopTimeout at most), so no controller outlives the suite's
// control plane.
func (s *Suite) StartManager(mgr manager.Manager) {
	done := make(chan error, 1)
	go func() { done <- mgr.Start(s.Ctx) }()
	s.Defer(func() {
		Eventually(done, ManagerStopTimeout).Should(Receive(BeNil()), "the manager stops without an error")
	})
}

// RegisterSuite registers the suite's BeforeSuite and AfterSuite (Ginkgo allows one of each, so a
// suite that uses it declares neither): BeforeSuite starts the control plane, then calls setup,
// where the suite binds its package variables and starts what it needs; AfterSuite cancels the
// context, runs what setup deferred and stops the control plane. Call it from a package-level
// variable: var _ = envtest.RegisterSuite(...).
func RegisterSuite(o SuiteOptions, setup func(s *Suite)) bool {
	s := &Suite{}
	BeforeSuite(func() {
		if o.Log {
			ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		}
		if o.EventuallyTimeout > 0 {
			SetDefaultEventuallyTimeout(o.EventuallyTimeout)
		}
		if o.PollingInterval > 0 {
			SetDefaultEventuallyPollingInterval(o.PollingInterval)
		}
		if o.ConsistentlyDuration > 0 {
			SetDefaultConsistentlyDuration(o.ConsistentlyDuration)
		}
		s.Ctx, s.cancel = context.WithCancel(context.Background())
		if o.Configure != nil {
			o.Configure(&o.Options)
		}
		var err error
		if o.ClusterAPI {
			s.Env, s.Client, err = StartWithClusterAPI(o.Options)
		} else {
			s.Env, s.Client, err = StartSuite(o.Options)
		}
		Expect(err).NotTo(HaveOccurred())
		if setup != nil {
			setup(s)
		}
	})
	AfterSuite(func() {
		if s.cancel != nil {
			s.cancel()
		}
		for i := len(s.after) - 1; i >= 0; i-- {
			s.after[i]()
		}
		if s.Env != nil {
			Expect(s.Env.Stop()).To(Succeed())
		}
	})
	return true
}

// Shared is one control plane for the plain (non-Ginkgo) tests and benchmarks of a package: the
// first Get starts it, every later Get returns the same one (or the same error), and TestMain
// calls Stop after m.Run. Declare it as a package variable: var cp envtest.Shared.
type Shared struct {
	// Options configures the control plane; set before the first Get.
	Options
	// ClusterAPI installs Cluster API's CRDs too.
	ClusterAPI bool

	once   sync.Once
	env    *Env
	client client.Client
	err    error
}

// Get returns the control plane and an administrator client, starting it on first use; a
// control plane that cannot start fails tb.
func (s *Shared) Get(tb testing.TB) (*Env, client.Client) {
	tb.Helper()
	s.once.Do(func() {
		if s.ClusterAPI {
			s.env, s.client, s.err = StartWithClusterAPI(s.Options)
		} else {
			s.env, s.client, s.err = StartSuite(s.Options)
		}
	})
	if s.err != nil {
		tb.Fatalf("start the control plane: %v", s.err)
	}
	return s.env, s.client
}

// Main is a package's TestMain around a Shared control plane: envtest's logs (through
// controller-runtime's logger) are discarded, the tests run, and the control plane a test
// started is stopped; a failed stop fails the run.
func (s *Shared) Main(m *testing.M) {
	logf.SetLogger(logr.Discard())
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// Stop stops the control plane if a Get started it.
func (s *Shared) Stop() error {
	if s.env == nil {
		return nil
	}
	if err := s.env.Stop(); err != nil {
		return fmt.Errorf("stop the control plane: %w", err)
	}
	return nil
}
