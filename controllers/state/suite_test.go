package state_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var (
	env *envtest.Env
	k8s client.Client
	ctx context.Context
)

func TestStateAgainstAPIServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "state (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
})
