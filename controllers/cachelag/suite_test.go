package cachelag_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

var (
	env    *envtest.Env
	k8s    client.Client
	ctx    context.Context
	cancel context.CancelFunc
	stale  *stalecache.Reader
	kit    *envtest.Kit
)

func TestCacheLag(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cache lag under injected staleness (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, k8s, err = envtest.StartWithClusterAPI(envtest.Options{})
	kit = &envtest.Kit{Ctx: ctx, Client: k8s, Prefix: "lag"}
	Expect(err).NotTo(HaveOccurred())

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
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
