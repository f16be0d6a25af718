package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/kubecontrollers"
)

var (
	env *envtest.Env
	k8s client.Client
	ctx = context.Background()
	// controlPlane is the package's one control plane, with Cluster API's CRDs.
	controlPlane = envtest.Shared{ClusterAPI: true}
	seq          atomic.Int64
)

// TestMain sets the managers' logger (errors only, to stderr: the tables and gate lines are the
// output) and stops what start started, if anything: the node, kube-controller-manager and
// kube-scheduler, then the control plane.
func TestMain(m *testing.M) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	code := m.Run()
	if err := stopCluster(code != 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// The cluster around the control plane, started once by start: the real kube-controller-manager
// and kube-scheduler (package kubecontrollers: the Job controller, the garbage collector, the
// namespace and ServiceAccount controllers and the rest act on the bench's objects as in a
// cluster), the bench's node (benchNode) and the folder of their files and log.
var (
	kube    *kubecontrollers.Running
	node    *benchNode
	kubeDir string
	kubeLog *os.File
)

// kubeControllerManagerArgs raise kube-controller-manager's client rate limit (20 requests a
// second by default, per controller): the fleets' fixtures run thousands of Jobs through the
// Job controller before anything is measured, and the Job controller and the garbage collector
// would otherwise take minutes to catch up with them. What the bench measures is the manager's
// own client, never theirs.
var kubeControllerManagerArgs = []string{"--kube-api-qps=200", "--kube-api-burst=400"}

// start starts the package's control plane, the real kube-controller-manager and
// kube-scheduler and the bench's node once (the first caller) for every test and benchmark;
// the gates of `make test` and the benchmarks of `make bench` share them. k8s is a client of
// its own with a high rate limit: the fleets are created through it.
func start(tb testing.TB) {
	tb.Helper()
	if k8s != nil {
		return
	}
	env, _ = controlPlane.Get(tb)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	if err := startCluster(cfg); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatalf("client for the fleets: %v", err)
	}
	k8s = c
}

// startCluster starts kube-controller-manager, kube-scheduler and the bench's node beside the
// control plane, their files and output in a folder of their own (kube-controllers.log).
func startCluster(cfg *rest.Config) error {
	if node != nil {
		return nil
	}
	if kubeDir == "" {
		dir, err := os.MkdirTemp("", "captf-bench-")
		if err != nil {
			return fmt.Errorf("kube controllers folder: %w", err)
		}
		kubeDir = dir
		if kubeLog, err = os.Create(filepath.Join(dir, "kube-controllers.log")); err != nil {
			return fmt.Errorf("kube controllers log: %w", err)
		}
	}
	if kube == nil {
		k, err := kubecontrollers.Start(ctx, kubecontrollers.Options{BinDir: env.BinaryAssetsDirectory, Config: env.Config,
			ServiceAccountKeyFile: filepath.Join(env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
			WorkDir:               filepath.Join(kubeDir, "kube-controllers"), Output: kubeLog,
			ExtraControllerManagerArgs: kubeControllerManagerArgs})
		if err != nil {
			return fmt.Errorf("start kube-controller-manager and kube-scheduler (log %s): %w", kubeLog.Name(), err)
		}
		kube = k
	}
	n, err := startNode(ctx, cfg, env.Scheme)
	if err != nil {
		return fmt.Errorf("start the bench's node: %w", err)
	}
	node = n
	return nil
}

// stopCluster stops the node, kube-controller-manager and kube-scheduler, then the control
// plane. Their folder is removed unless keep (a failed run), whose log it then names.
func stopCluster(keep bool) error {
	var errs []error
	if node != nil {
		node.stop()
	}
	if kube != nil {
		if err := kube.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop kube controllers: %w", err))
		}
	}
	if err := controlPlane.Stop(); err != nil {
		errs = append(errs, err)
	}
	if kubeLog != nil {
		_ = kubeLog.Close()
	}
	if kubeDir != "" {
		if keep {
			fmt.Fprintf(os.Stderr, "kube-controller-manager's and kube-scheduler's log: %s\n", kubeLog.Name())
		} else if err := os.RemoveAll(kubeDir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", kubeDir, err))
		}
	}
	return errors.Join(errs...)
}

func namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, seq.Add(1))}}
	if err := k8s.Create(ctx, ns); err != nil {
		tb.Fatal(err)
	}
	return ns.Name
}

// counter counts the HTTP requests a manager sends, by "VERB resource".
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			c.n[r.Method+" "+resourceOf(r.URL.Path)]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *counter) reset() {
	c.mu.Lock()
	c.n = map[string]int{}
	c.mu.Unlock()
}

func (c *counter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, total := map[string]int{}, 0
	for k, v := range c.n {
		out[k] = v
		total += v
	}
	return out, total
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf turns /apis/g/v/namespaces/ns/res/name/sub into res[/sub].
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts)-1; i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	if len(parts) > 0 {
		return parts[len(parts)-1]
	}
	return path
}

// startManager runs the product's manager (setup.New) with a request counter and optional
// extra options; stop it with the returned function.
func startManager(tb testing.TB, c *counter, extra ...func(*manager.Options)) (manager.Manager, func()) {
	tb.Helper()
	var wrap func(http.RoundTripper) http.RoundTripper
	if c != nil {
		wrap = c.wrap
	}
	return startManagerWith(tb, wrap, extra...)
}

// startManagerWith is startManager with any transport wrapper (nil: none).
func startManagerWith(tb testing.TB, wrap func(http.RoundTripper) http.RoundTripper, extra ...func(*manager.Options)) (manager.Manager, func()) {
	tb.Helper()
	return startManagerOpts(tb, wrap, setup.Options{}, extra...)
}

// startManagerOpts is startManagerWith with the product's options (the metrics and probe
// addresses and the runner image are always the bench's own).
func startManagerOpts(tb testing.TB, wrap func(http.RoundTripper) http.RoundTripper, o setup.Options, extra ...func(*manager.Options)) (manager.Manager, func()) {
	tb.Helper()
	o.MetricsAddr, o.ProbeAddr, o.RunnerImage = "0", "0", "captf/manager:bench"
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = wrap
	extra = append(extra, func(o *manager.Options) {
		skip := true
		o.Controller.SkipNameValidation = &skip
		// A fleet of 200 objects on a loaded 2-core machine can hold the last reconciles past
		// the default 30 s; the gates measure the passes, not how fast a manager stops.
		grace := shutdownGrace
		o.GracefulShutdownTimeout = &grace
	})
	mgr, err := setup.New(cfg, o, extra...)
	if err != nil {
		tb.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		tb.Fatal("cache did not sync")
	}
	return mgr, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("manager: %v", err)
			}
			return
		case <-time.After(slowShutdown):
		}
		// Slow to stop: keep the stacks, so a reconcile that ignores its context shows itself.
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		if err := <-done; err != nil {
			tb.Errorf("manager: %v; goroutines %s after the stop:\n%s", err, slowShutdown, stacks.String())
			return
		}
		tb.Logf("the manager took more than %s to stop; goroutines then:\n%s", slowShutdown, stacks.String())
	}
}

const (
	// shutdownGrace is the bench managers' graceful shutdown timeout.
	shutdownGrace = 2 * time.Minute
	// slowShutdown is when a stopping manager's goroutines are written to the test log.
	slowShutdown = 20 * time.Second
)
