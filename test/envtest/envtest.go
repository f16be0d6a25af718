package envtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Options says what to install besides CAPTF's CRDs.
type Options struct {
	// ExtraCRDPaths are more CRD files or folders to install (Cluster API's, for example).
	ExtraCRDPaths []string
	// WithoutCAPTFCRDs installs ExtraCRDPaths only: for a suite that installs CAPTF's CRDs the
	// way a person does (clusterctl).
	WithoutCAPTFCRDs bool
	// Webhooks, when set, are installed so the API server calls the test's webhook server.
	Webhooks *envtest.WebhookInstallOptions
	// APIServerFlags are set on kube-apiserver (an audit policy and log, for example).
	APIServerFlags map[string]string
	// AddToScheme adds more types to the scheme (Env.Scheme, the suite's client).
	AddToScheme []func(*runtime.Scheme) error
}

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Scheme knows the core, Cluster API and CAPTF types.
	Scheme *runtime.Scheme
}

// RepoRoot finds the module root by walking up from the working directory to go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// AdmissionPlugins are the admission plugins that every control plane of the tests (envtest's
// and the sandbox's) turns on beyond kube-apiserver's default set, because clusters users run
// turn them on: OwnerReferencesPermissionEnforcement (OpenShift enables it) refuses an owner
// reference with blockOwnerDeletion to a writer without update on the owner's finalizers
// subresource, and a change of an object's owner references to a writer that may not delete
// it. Running it everywhere proves that the manager's installed Role grants what it needs.
const AdmissionPlugins = "OwnerReferencesPermissionEnforcement"

// AssetsDir is where etcd and kube-apiserver live: $KUBEBUILDER_ASSETS, else <repo>/bin.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run 'make test-bins' to build it from source: %w", b, dir, err)
		}
	}
	return dir, nil
}

// NewScheme returns a scheme with the core, Cluster API and CAPTF types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Start starts etcd and kube-apiserver and installs the CRDs. Stop it with Env.Stop.
func Start(opts Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	for _, add := range opts.AddToScheme {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	crds := opts.ExtraCRDPaths
	if !opts.WithoutCAPTFCRDs {
		crds = append([]string{filepath.Join(root, "config", "crd", "bases")}, crds...)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
	}
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("enable-admission-plugins", AdmissionPlugins)
	for flag, value := range opts.APIServerFlags {
		args.Set(flag, value)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest control plane from %s: %w", assets, err)
	}
	return &Env{Environment: env, Config: cfg, Scheme: s}, nil
}

// Describe says which kube-apiserver and etcd the suite runs against, as the server reports it.
func (e *Env) Describe() string {
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return fmt.Sprintf("envtest: discovery client: %v", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Sprintf("envtest: server version: %v", err)
	}
	return fmt.Sprintf("envtest: real kube-apiserver %s (%s) at %s, binaries from %s",
		v.GitVersion, v.GoVersion, e.Config.Host, e.BinaryAssetsDirectory)
}

// ClusterAPIVersion is the Cluster API release whose CRDs the suites install; the Makefile
// exports CLUSTER_API_VERSION from hack/versions.mk.
func ClusterAPIVersion() string {
	if v := os.Getenv("CLUSTER_API_VERSION"); v != "" {
		return v
	}
	return "v1.14.2"
}

// ClusterAPICRDs returns the folder of Cluster API's core CRDs inside the cluster-api module,
// downloading the module through the Go module proxy when the module cache lacks it.
func ClusterAPICRDs() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+ClusterAPIVersion()).Output()
	if err != nil {
		return "", fmt.Errorf("download sigs.k8s.io/cluster-api: %w", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("locate sigs.k8s.io/cluster-api: %v", err)
	}
	dir := filepath.Join(m.Dir, "core", "config", "crd", "bases")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("cluster api crds: %w", err)
	}
	return dir, nil
}

// ClusterAPIKubeadmCRDs returns the folders of the CRDs of Cluster API's kubeadm bootstrap and
// control plane providers (what clusterctl init installs beside the core by default), inside the
// cluster-api module.
func ClusterAPIKubeadmCRDs() ([]string, error) {
	core, err := ClusterAPICRDs()
	if err != nil {
		return nil, err
	}
	module := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(core))))
	dirs := []string{
		filepath.Join(module, "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(module, "controlplane", "kubeadm", "config", "crd", "bases"),
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("cluster api kubeadm crds: %w", err)
		}
	}
	return dirs, nil
}

// StartWithClusterAPI is StartSuite with Cluster API's CRDs installed too.
func StartWithClusterAPI(opts Options) (*Env, client.Client, error) {
	capi, err := ClusterAPICRDs()
	if err != nil {
		return nil, nil, err
	}
	opts.ExtraCRDPaths = append([]string{capi}, opts.ExtraCRDPaths...)
	return StartSuite(opts)
}

// StartSuite starts a control plane, prints which API server the suite runs against (shown by
// go test -v), and returns an administrator client for the suite.
func StartSuite(opts Options) (*Env, client.Client, error) {
	env, err := Start(opts)
	if err != nil {
		return nil, nil, err
	}
	fmt.Println(env.Describe())
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, nil, fmt.Errorf("client for the suite: %w", err)
	}
	return env, c, nil
}
