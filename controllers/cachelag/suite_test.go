package cachelag_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

var (
	env   *envtest.Env
	k8s   client.Client
	ctx   context.Context
	stale *stalecache.Reader
	kit   *envtest.Kit
	// cached is the manager's client: it reads through the cache (and the double).
	cached client.Client
)

func TestCacheLag(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cache lag under injected staleness (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{
	ClusterAPI: true, Log: true, EventuallyTimeout: 20 * time.Second, PollingInterval: 100 * time.Millisecond,
	ConsistentlyDuration: 3 * time.Second,
}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	kit = &envtest.Kit{Ctx: ctx, Client: k8s, Prefix: "lag"}

	// The manager reads through the stale-cache double; writes and its API reader reach the
	// real API server.
	mgr, err := setup.New(env.Config, setup.Options{MetricsAddr: "0", ProbeAddr: "0", Concurrency: 2,
		RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test"},
		func(o *manager.Options) {
			skip := true
			o.Controller.SkipNameValidation = &skip
			o.NewClient = func(cfg *rest.Config, co client.Options) (client.Client, error) {
				stale = stalecache.Wrap(co.Cache.Reader, co.Scheme)
				co.Cache.Reader = stale
				return client.New(cfg, co)
			}
		})
	Expect(err).NotTo(HaveOccurred())
	cached = mgr.GetClient()
	s.StartManager(mgr)
})
