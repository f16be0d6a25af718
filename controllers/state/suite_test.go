package state_test

import (
	"context"
	"fmt"
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

var _ = BeforeSuite(func() {
	ctx = context.Background()
	var err error
	env, err = envtest.Start(envtest.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	fmt.Println(env.Describe())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
