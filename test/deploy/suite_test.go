package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// The suite's control plane starts with cert-manager's and Cluster API's CRDs only: CAPTF's
// own CRDs, RBAC, webhooks and certificates arrive through clusterctl, as in a real install.
var (
	ctx context.Context
	cfg *rest.Config
	// auditLog records every request the API server serves (metadata only).
	auditLog string
	admin    client.Client
	repo     string
	certMgr  string
)

// auditPolicy logs who did what, without bodies, once per completed request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func TestDeployment(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "deploy: kustomize, clusterctl, certificates (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{Log: true, Configure: func(o *envtest.Options) {
	var err error
	repo, err = envtest.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	for _, t := range []string{"kustomize", "clusterctl"} {
		_, err := tool(t)
		Expect(err).NotTo(HaveOccurred())
	}
	capi, err := envtest.ClusterAPICRDs()
	Expect(err).NotTo(HaveOccurred())
	// kubeadm's bootstrap and control plane providers, which clusterctl init installs by
	// default: the samples' ClusterClass names their templates.
	kubeadm, err := envtest.ClusterAPIKubeadmCRDs()
	Expect(err).NotTo(HaveOccurred())
	// cert-manager's CRDs at the version go.mod pins, the version whose controllers
	// (certmanager.Start) issue the manager's serving certificate.
	certMgr, err = certmanager.CRDDir()
	Expect(err).NotTo(HaveOccurred())

	dir := GinkgoT().TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	auditLog = filepath.Join(dir, "audit.log")
	*o = envtest.Options{
		WithoutCAPTFCRDs: true,
		ExtraCRDPaths:    append([]string{certMgr, capi}, kubeadm...),
		APIServerFlags:   map[string]string{"audit-policy-file": policy, "audit-log-path": auditLog},
		AddToScheme:      []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme},
	}
}}, func(s *envtest.Suite) {
	ctx, cfg, admin = s.Ctx, s.Env.Config, s.Client
	fmt.Fprintf(GinkgoWriter, "envtest at %s; cert-manager CRDs from %s\n", cfg.Host, certMgr)
})
