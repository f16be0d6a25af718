package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/controllers/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var (
	env  *envtest.Env
	k8s  client.Client
	ctx  = context.Background()
	once sync.Once
	seq  atomic.Int64
)

// TestMain starts one control plane for every benchmark and stops it at the end.
func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

func start(b *testing.B) {
	b.Helper()
	once.Do(func() {
		capi, err := envtest.ClusterAPICRDs()
		if err != nil {
			panic(err)
		}
		env, err = envtest.Start(envtest.Options{ExtraCRDPaths: []string{capi}})
		if err != nil {
			panic(err)
		}
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 500, 1000
		k8s, err = client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			panic(err)
		}
	})
	if env == nil {
		b.Fatal("no control plane")
	}
}

func namespace(b *testing.B, prefix string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, seq.Add(1))}}
	if err := k8s.Create(ctx, ns); err != nil {
		b.Fatal(err)
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
func startManager(b *testing.B, c *counter, extra ...func(*manager.Options)) (manager.Manager, func()) {
	b.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	if c != nil {
		cfg.WrapTransport = c.wrap
	}
	extra = append(extra, func(o *manager.Options) {
		skip := true
		o.Controller.SkipNameValidation = &skip
	})
	mgr, err := setup.New(cfg, setup.Options{MetricsAddr: "0", ProbeAddr: "0", RunnerImage: "captf/manager:bench"}, extra...)
	if err != nil {
		b.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		b.Fatal("cache did not sync")
	}
	return mgr, func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("manager: %v", err)
		}
	}
}
