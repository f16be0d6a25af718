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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// The suite's control plane starts with cert-manager's and Cluster API's CRDs only: CAPTF's
// own CRDs, RBAC, webhooks and certificates arrive through clusterctl, as in a real install.
var (
	ctx    context.Context
	cancel context.CancelFunc
	env    *ctrlenvtest.Environment
	cfg    *rest.Config
	// auditLog records every request the API server serves (metadata only).
	auditLog string
	tmpDir   string
	admin    client.Client
	scheme   *runtime.Scheme
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

// certManagerVersion is the cert-manager release whose CRDs the suite installs; the Makefile
// exports CERT_MANAGER_VERSION from hack/versions.mk.
func certManagerVersion() string {
	if v := os.Getenv("CERT_MANAGER_VERSION"); v != "" {
		return v
	}
	return "v1.21.2"
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	repo, err = envtest.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	for _, t := range []string{"kustomize", "clusterctl"} {
		_, err := tool(t)
		Expect(err).NotTo(HaveOccurred())
	}
	assets, err := envtest.AssetsDir()
	Expect(err).NotTo(HaveOccurred())
	capi, err := envtest.ClusterAPICRDs()
	Expect(err).NotTo(HaveOccurred())
	// kubeadm's bootstrap and control plane providers, which clusterctl init installs by
	// default: the samples' ClusterClass names their templates.
	kubeadm, err := envtest.ClusterAPIKubeadmCRDs()
	Expect(err).NotTo(HaveOccurred())
	cm, err := goModDir("github.com/cert-manager/cert-manager@" + certManagerVersion())
	Expect(err).NotTo(HaveOccurred())
	certMgr = filepath.Join(cm, "deploy", "crds")

	scheme = runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(clusterv1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(infrav1.AddToScheme(scheme)).To(Succeed())
	env = &ctrlenvtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{certMgr, capi}, kubeadm...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	tmpDir, err = os.MkdirTemp("", "captf-deploy-")
	Expect(err).NotTo(HaveOccurred())
	policy := filepath.Join(tmpDir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	auditLog = filepath.Join(tmpDir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog)
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "envtest at %s; cert-manager CRDs from %s\n", cfg.Host, certMgr)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
	if tmpDir != "" {
		Expect(os.RemoveAll(tmpDir)).To(Succeed())
	}
})
