package runlease_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// The suite runs against a real kube-apiserver and etcd (test/envtest). Every client it builds
// is uncached (client.New), so reads in the specs are live, as the Manager's reader must be.
var (
	env   *envtest.Env
	admin client.Client
	ctx   context.Context
)

func TestLeasesOnARealAPIServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "runlease (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{}, func(s *envtest.Suite) {
	env, admin, ctx = s.Env, s.Client, s.Ctx
})
