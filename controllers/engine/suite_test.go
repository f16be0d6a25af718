package engine_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var (
	env *envtest.Env
	k8s client.Client
	ctx context.Context
	clk *clocktesting.FakeClock
	kit *envtest.Kit
)

func TestEngine(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Engine lifecycle (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{
	ClusterAPI: true, Log: true, EventuallyTimeout: 20 * time.Second, PollingInterval: 100 * time.Millisecond,
}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	kit = &envtest.Kit{Ctx: ctx, Client: k8s, Prefix: "engine"}

	clk = clocktesting.NewFakeClock(time.Now())
	mgr, err := setup.New(env.Config, setup.Options{
		MetricsAddr: "0", ProbeAddr: "0", Clock: clk, Concurrency: 2, StateBackups: 5,
		RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test", IdentityNamespace: identityNamespace,
		StateReplica: startReplicaStore(),
	}, func(o *manager.Options) { o.Controller.SkipNameValidation = ptrTo(true) })
	Expect(err).NotTo(HaveOccurred())
	s.StartManager(mgr)
})

func ptrTo[T any](v T) *T { return &v }
