package engine_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var (
	env    *envtest.Env
	k8s    client.Client
	ctx    context.Context
	cancel context.CancelFunc
	clk    *clocktesting.FakeClock
	kit    *envtest.Kit
)

func TestEngine(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Engine lifecycle (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, k8s, err = envtest.StartWithClusterAPI(envtest.Options{})
	Expect(err).NotTo(HaveOccurred())
	kit = &envtest.Kit{Ctx: ctx, Client: k8s, Prefix: "engine"}

	clk = clocktesting.NewFakeClock(time.Now())
	mgr, err := setup.New(env.Config, setup.Options{
		MetricsAddr: "0", ProbeAddr: "0", Clock: clk, Concurrency: 2, StateBackups: 5,
		RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test",
	}, func(o *manager.Options) { o.Controller.SkipNameValidation = ptrTo(true) })
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

func ptrTo[T any](v T) *T { return &v }
