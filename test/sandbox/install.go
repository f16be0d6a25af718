package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/capimanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// Names the sandbox installs, as a clusterctl install of CAPTF and Cluster API would.
const (
	// ManagerNamespace is the namespace of CAPTF's inventory entry and manager identity.
	ManagerNamespace = "captf-system"
	// ManagerServiceAccount is the identity the manager runs as.
	ManagerServiceAccount = "captf-controller-manager"
	// ManagerClusterRole is config/rbac/role.yaml's ClusterRole under its deployed name.
	ManagerClusterRole = "captf-manager-role"
	// ProviderVersion is the version CAPTF's inventory entry claims (the release metadata.yaml
	// describes).
	ProviderVersion = "v0.1.0"
	// ValidatingWebhookConfiguration and MutatingWebhookConfiguration are the names of the
	// configurations, as config/default names them.
	ValidatingWebhookConfiguration = "captf-validating-webhook-configuration"
	MutatingWebhookConfiguration   = "captf-mutating-webhook-configuration"
)

// Labels clusterctl reads on CRDs and inventory entries.
const (
	clusterctlLabel     = "clusterctl.cluster.x-k8s.io"
	clusterctlCoreLabel = "clusterctl.cluster.x-k8s.io/core"
	providerLabel       = "cluster.x-k8s.io/provider"
)

// startControlPlane starts etcd and kube-apiserver with every CRD installed: CAPTF's, those of
// the three Cluster API managers, cert-manager's, and clusterctl's inventory.
func (s *Sandbox) startControlPlane() error {
	module, err := capiModule()
	if err != nil {
		return err
	}
	crdPaths := []string{filepath.Join(s.opts.RepoRoot, "config", "crd", "bases")}
	for _, p := range capimanager.Providers {
		crdPaths = append(crdPaths, filepath.Join(module, filepath.FromSlash(p.ConfigDir), "crd", "bases"))
	}
	certManagerCRDs, err := certmanager.CRDDir()
	if err != nil {
		return err
	}
	crdPaths = append(crdPaths, certManagerCRDs)
	inventory := filepath.Join(module, "cmd", "clusterctl", "config", "manifest", "clusterctl-api.yaml")
	// The control plane's folders live in the work folder (a fresh one each start), so what
	// etcd and kube-apiserver run with names this sandbox, and a killed sandbox's guard
	// removes them with a temporary work folder.
	cp := s.controlPlaneDir()
	if err := os.RemoveAll(cp); err != nil {
		return fmt.Errorf("clear control plane folder: %w", err)
	}
	etcdDir, apiDir := filepath.Join(cp, "etcd"), filepath.Join(cp, "kube-apiserver")
	for _, d := range []string{etcdDir, apiDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create control plane folder: %w", err)
		}
	}
	s.env = &envtest.Environment{
		BinaryAssetsDirectory: s.opts.BinDir,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              append(crdPaths, inventory),
			ErrorIfPathMissing: true,
			MaxTime:            time.Minute,
		},
		Scheme:                   s.scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	s.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	s.env.ControlPlane.APIServer = &envtest.APIServer{CertDir: apiDir}
	if err := s.configureAPIServer(cp); err != nil {
		return err
	}
	cfg, err := s.env.Start()
	// envtest starts etcd and kube-apiserver in process groups of their own, without a
	// parent-death signal: the guard must know them before anything else happens.
	if gerr := proc.GuardChildren(10 * time.Second); gerr != nil {
		return errors.Join(err, fmt.Errorf("guard the control plane: %w", gerr))
	}
	if err != nil {
		return fmt.Errorf("start control plane (binaries from %s): %w", s.opts.BinDir, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	admin, err := s.env.AddUser(envtest.User{Name: "captf-sandbox-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return fmt.Errorf("add administrator: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("administrator kubeconfig: %w", err)
	}
	if err := writeFile(s.opts.KubeconfigPath, kc); err != nil {
		return err
	}
	s.cfg = admin.Config()
	s.cfg.QPS, s.cfg.Burst = 100, 200
	s.client, err = client.New(s.cfg, client.Options{Scheme: s.scheme})
	if err != nil {
		return fmt.Errorf("administrator client: %w", err)
	}
	return nil
}

// configureAPIServer sets kube-apiserver's flags beyond envtest's: the admission plugins of a
// cluster (the default set and testenv.AdmissionPlugins), the tolerations asked for, and the kubelet client that reads the node's logs (its
// certificates written into cp).
func (s *Sandbox) configureAPIServer(cp string) error {
	args := s.env.ControlPlane.APIServer.Configure()
	// envtest turns the ServiceAccount admission plugin off (its suites run no ServiceAccount
	// controller); the sandbox runs the real one, so it keeps the API server's default, as a
	// cluster does: a pod gets its account's imagePullSecrets, and a pod naming an account
	// that does not exist is refused.
	args.Disable("disable-admission-plugins")
	args.Set("enable-admission-plugins", testenv.AdmissionPlugins)
	// The API server reaches the node's kubelet endpoint (pod logs) as it reaches a kubelet:
	// with its kubelet client certificate, checking the node's against the kubelet CA.
	var err error
	if s.kubeletPKI, err = executor.NewKubeletPKI(filepath.Join(cp, "kubelet-pki")); err != nil {
		return err
	}
	for flag, value := range s.kubeletPKI.APIServerFlags() {
		args.Set(flag, value)
	}
	if t := s.opts.UnreachableTolerationSeconds; t > 0 {
		args.Set("default-unreachable-toleration-seconds", strconv.Itoa(t))
		args.Set("default-not-ready-toleration-seconds", strconv.Itoa(t))
	}
	return nil
}

// install labels the CRDs for clusterctl, writes the provider inventory, the manager's RBAC and
// identity, starts cert-manager's controllers, creates the Issuers and serving Certificates and
// the webhook configurations that take their CA from them, and starts copying each issued
// Secret into the folder its manager serves from.
func (s *Sandbox) install(ctx context.Context) error {
	if err := s.labelCRDs(ctx); err != nil {
		return err
	}
	namespaces := []string{ManagerNamespace}
	for _, p := range capimanager.Providers {
		namespaces = append(namespaces, p.Namespace)
	}
	for _, ns := range namespaces {
		if err := s.ensure(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := s.writeInventory(ctx); err != nil {
		return err
	}
	if err := s.installManagerRBAC(ctx); err != nil {
		return err
	}
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	s.WebhookPort = port
	s.capiPorts = map[string]int{}
	for _, p := range capimanager.Providers {
		if s.capiPorts[p.Binary], err = proc.FreePort(); err != nil {
			return err
		}
	}
	if err := s.startCertManager(); err != nil {
		return err
	}
	if err := s.installWebhooks(ctx); err != nil {
		return err
	}
	if err := s.installCAPIWebhooks(ctx); err != nil {
		return err
	}
	return s.copyServingCertificates()
}

// labelCRDs gives every CRD the labels `clusterctl init` gives the CRDs it installs: move
// discovers only CRDs labelled clusterctl.cluster.x-k8s.io. Cluster API's CRDs also get the
// labels their config/crd kustomization adds (the contract versions, which the topology
// controller reads on the kubeadm templates a ClusterClass names).
func (s *Sandbox) labelCRDs(ctx context.Context) error {
	module, err := capiModule()
	if err != nil {
		return err
	}
	kustomized := map[string]map[string]string{}
	for _, p := range capimanager.Providers {
		if kustomized[p.Group], err = kustomizationLabels(filepath.Join(module, filepath.FromSlash(p.ConfigDir), "crd", "kustomization.yaml")); err != nil {
			return err
		}
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := s.client.List(ctx, &crds); err != nil {
		return fmt.Errorf("list crds: %w", err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		provider, labels := capimanager.Core.Name, kustomized[capimanager.Core.Group]
		switch crd.Spec.Group {
		case infrav1.GroupVersion.Group:
			provider, labels = "infrastructure-terraform", nil
		case capimanager.KubeadmBootstrap.Group:
			provider, labels = capimanager.KubeadmBootstrap.Name, kustomized[capimanager.KubeadmBootstrap.Group]
		case capimanager.KubeadmControlPlane.Group:
			provider, labels = capimanager.KubeadmControlPlane.Name, kustomized[capimanager.KubeadmControlPlane.Group]
		case "clusterctl.cluster.x-k8s.io":
			continue // clusterctl's own inventory
		case certManagerGroup, "acme." + certManagerGroup:
			// What clusterctl init gives cert-manager's objects when it installs cert-manager.
			provider, labels = "", map[string]string{clusterctlCoreLabel: "cert-manager"}
		}
		patch := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		for k, v := range labels {
			crd.Labels[k] = v
		}
		crd.Labels[clusterctlLabel] = ""
		if provider != "" {
			crd.Labels[providerLabel] = provider
		}
		if err := s.client.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("label crd %s: %w", crd.Name, err)
		}
	}
	return nil
}

// kustomizationLabels reads the label pairs a kustomization.yaml adds to what it renders.
func kustomizationLabels(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var k struct {
		Labels []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&k); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	out := map[string]string{}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			out[key] = v
		}
	}
	return out, nil
}

// writeInventory records Cluster API's three providers and CAPTF as installed, which clusterctl
// move reads in both management clusters.
func (s *Sandbox) writeInventory(ctx context.Context) error {
	type entry struct{ ns, name, kind, provider, version string }
	var entries []entry
	for _, p := range capimanager.Providers {
		// The inventory's provider name drops the type prefix (clusterctl's "kubeadm" for both).
		short := p.Name
		if p.Type != capimanager.Core.Type {
			short = "kubeadm"
		}
		entries = append(entries, entry{p.Namespace, p.Name, p.Type, short, testenv.ClusterAPIVersion()})
	}
	entries = append(entries, entry{ManagerNamespace, "infrastructure-terraform", "InfrastructureProvider", "terraform", ProviderVersion})
	for _, p := range entries {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("clusterctl.cluster.x-k8s.io/v1alpha3")
		u.SetKind("Provider")
		u.SetNamespace(p.ns)
		u.SetName(p.name)
		u.SetLabels(map[string]string{clusterctlLabel: "", providerLabel: p.name, clusterctlCoreLabel: "inventory"})
		u.Object["type"], u.Object["providerName"], u.Object["version"] = p.kind, p.provider, p.version
		if err := s.ensure(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// installManagerRBAC installs config/rbac's ClusterRole and binds it to the manager's
// ServiceAccount.
func (s *Sandbox) installManagerRBAC(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(s.opts.RepoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		return fmt.Errorf("read manager role: %w", err)
	}
	objs, err := decodeYAML(raw)
	if err != nil {
		return fmt.Errorf("decode manager role: %w", err)
	}
	var role *rbacv1.ClusterRole
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" {
			role = &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
				return fmt.Errorf("decode manager role: %w", err)
			}
		}
	}
	if role == nil {
		return errors.New("config/rbac/role.yaml holds no ClusterRole")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: ManagerClusterRole}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ManagerClusterRole + "binding"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ManagerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ManagerServiceAccount, Namespace: ManagerNamespace}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: ManagerServiceAccount}}
	for _, o := range []client.Object{role, binding, sa} {
		if err := s.ensure(ctx, o); err != nil {
			return err
		}
	}
	user, err := s.env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ManagerNamespace + ":" + ManagerServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ManagerNamespace, "system:authenticated"},
	}, s.cfg)
	if err != nil {
		return fmt.Errorf("add manager identity: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("manager kubeconfig: %w", err)
	}
	return writeFile(s.managerKubeconfig(), kc)
}

func (s *Sandbox) managerKubeconfig() string {
	return filepath.Join(s.opts.WorkDir, "manager.kubeconfig")
}

func (s *Sandbox) certDir() string { return filepath.Join(s.opts.WorkDir, "webhook-certs") }

// controlPlaneDir holds etcd's data and kube-apiserver's certificates; Stop removes it.
func (s *Sandbox) controlPlaneDir() string { return filepath.Join(s.opts.WorkDir, "control-plane") }

func (s *Sandbox) capiCertDir(p capimanager.Provider) string {
	return filepath.Join(s.opts.WorkDir, "webhook-certs-"+p.Binary)
}

// installWebhooks renders config/default with kustomize (what ships) and installs its
// cert-manager Issuers and Certificates and its webhook configurations, which carry the
// cert-manager.io/inject-ca-from annotation config/default gives them; every webhook is pointed
// at the manager's local webhook server instead of the Service.
func (s *Sandbox) installWebhooks(ctx context.Context) error {
	objs, err := s.configDefault()
	if err != nil {
		return err
	}
	var certObjs, webhookObjs []*unstructured.Unstructured
	for _, u := range objs {
		switch {
		case u.GroupVersionKind().Group == certManagerGroup:
			certObjs = append(certObjs, u)
		case u.GetKind() == "ValidatingWebhookConfiguration" || u.GetKind() == "MutatingWebhookConfiguration":
			webhookObjs = append(webhookObjs, u)
		}
	}
	return s.installIssuedWebhooks(ctx, certObjs, webhookObjs, s.WebhookPort, s.certDir(), ValidatingWebhookConfiguration, MutatingWebhookConfiguration)
}

// installCAPIWebhooks installs the webhook configurations of Cluster API's three managers, as
// the module ships them (<provider>/config/webhook/manifests.yaml), each pointed at its
// manager's local webhook server, under the names clusterctl init gives them, and each
// manager's Issuer and serving Certificate (<provider>/config/certmanager/certificate.yaml),
// named as its config/default names them; the configurations take their CA from that
// Certificate.
func (s *Sandbox) installCAPIWebhooks(ctx context.Context) error {
	module, err := capiModule()
	if err != nil {
		return err
	}
	for _, p := range capimanager.Providers {
		raw, err := os.ReadFile(filepath.Join(module, filepath.FromSlash(p.ConfigDir), "webhook", "manifests.yaml"))
		if err != nil {
			return fmt.Errorf("read the webhook configurations of %s: %w", p.Name, err)
		}
		objs, err := decodeYAML(raw)
		if err != nil {
			return fmt.Errorf("decode the webhook configurations of %s: %w", p.Name, err)
		}
		certObjs, err := capiCertificates(module, p)
		if err != nil {
			return err
		}
		if err := annotateInjectCAFrom(certObjs, objs); err != nil {
			return fmt.Errorf("the certificate of %s: %w", p.Name, err)
		}
		err = s.installIssuedWebhooks(ctx, certObjs, objs, s.capiPorts[p.Binary], s.capiCertDir(p),
			p.WebhookConfigurationPrefix+"-validating-webhook-configuration", p.WebhookConfigurationPrefix+"-mutating-webhook-configuration")
		if err != nil {
			return err
		}
	}
	return nil
}

// installWebhookConfigurations creates the validating and the mutating webhook configuration
// of objs under the given names, every webhook pointed at the local webhook server on port
// instead of its Service. Their caBundle is cert-manager's cainjector's to fill.
func (s *Sandbox) installWebhookConfigurations(ctx context.Context, objs []*unstructured.Unstructured, port int, validatingName, mutatingName string) error {
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	var validating, mutating []string
	for _, u := range objs {
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
				return fmt.Errorf("decode %s: %w", u.GetName(), err)
			}
			cfg.Name = validatingName
			for i := range cfg.Webhooks {
				if err := pointAt(&cfg.Webhooks[i].ClientConfig, base); err != nil {
					return fmt.Errorf("webhook %s: %w", cfg.Webhooks[i].Name, err)
				}
			}
			if err := s.client.Create(ctx, cfg); err != nil {
				return fmt.Errorf("create %s: %w", cfg.Name, err)
			}
			validating = append(validating, cfg.Name)
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
				return fmt.Errorf("decode %s: %w", u.GetName(), err)
			}
			cfg.Name = mutatingName
			for i := range cfg.Webhooks {
				if err := pointAt(&cfg.Webhooks[i].ClientConfig, base); err != nil {
					return fmt.Errorf("webhook %s: %w", cfg.Webhooks[i].Name, err)
				}
			}
			if err := s.client.Create(ctx, cfg); err != nil {
				return fmt.Errorf("create %s: %w", cfg.Name, err)
			}
			mutating = append(mutating, cfg.Name)
		}
	}
	if len(validating) == 0 || len(mutating) == 0 {
		return fmt.Errorf("no validating or no mutating webhook configuration to install as %s, %s", validatingName, mutatingName)
	}
	return nil
}

// repointWebhooks points every webhook of the sandbox's configurations at another port of the
// local webhook server.
func (s *Sandbox) repointWebhooks(ctx context.Context, port int) error {
	if err := s.repointWebhookConfigurations(ctx, port, ValidatingWebhookConfiguration, MutatingWebhookConfiguration); err != nil {
		return err
	}
	s.WebhookPort = port
	return nil
}

// repointCAPIWebhooks returns what points a Cluster API manager's webhook configurations at
// another port, for a manager started again because its webhook port was taken.
func (s *Sandbox) repointCAPIWebhooks(p capimanager.Provider) func(context.Context, int) error {
	return func(ctx context.Context, port int) error {
		err := s.repointWebhookConfigurations(ctx, port,
			p.WebhookConfigurationPrefix+"-validating-webhook-configuration", p.WebhookConfigurationPrefix+"-mutating-webhook-configuration")
		if err != nil {
			return err
		}
		s.capiPorts[p.Binary] = port
		return nil
	}
}

// repointWebhookConfigurations points every webhook of the two named configurations at another
// port of the local webhook server, keeping each webhook's path.
func (s *Sandbox) repointWebhookConfigurations(ctx context.Context, port int, validatingName, mutatingName string) error {
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	repoint := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.URL == nil {
			return
		}
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return
		}
		v := base + u.Path
		cc.URL = &v
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: validatingName}, v); err != nil {
			return err
		}
		for i := range v.Webhooks {
			repoint(&v.Webhooks[i].ClientConfig)
		}
		return s.client.Update(ctx, v)
	})
	if err != nil {
		return fmt.Errorf("repoint %s: %w", validatingName, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: mutatingName}, m); err != nil {
			return err
		}
		for i := range m.Webhooks {
			repoint(&m.Webhooks[i].ClientConfig)
		}
		return s.client.Update(ctx, m)
	})
	if err != nil {
		return fmt.Errorf("repoint %s: %w", mutatingName, err)
	}
	return nil
}

// capiModule is the folder of the sigs.k8s.io/cluster-api module at the pinned version (each
// manager's CRDs are in <ConfigDir>/crd/bases, its webhook configurations in <ConfigDir>/webhook,
// clusterctl's inventory CRD in cmd/clusterctl/config/manifest).
func capiModule() (string, error) {
	crds, err := testenv.ClusterAPICRDs()
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(crds)))), nil
}

// pointAt replaces a Service reference with the URL of the local webhook server.
func pointAt(cc *admissionregistrationv1.WebhookClientConfig, base string) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return errors.New("no service path to point at the local webhook server")
	}
	u := base + *cc.Service.Path
	cc.URL, cc.Service = &u, nil
	return nil
}

// configDefault is config/default rendered with kustomize (what ships), rendered once per
// sandbox: the webhooks, their certificate and the manager's namespace take disjoint objects
// of it.
func (s *Sandbox) configDefault() ([]*unstructured.Unstructured, error) {
	if s.defaultObjs == nil {
		objs, err := s.Kustomize(filepath.Join(s.opts.RepoRoot, "config", "default"))
		if err != nil {
			return nil, err
		}
		s.defaultObjs = objs
	}
	return s.defaultObjs, nil
}

// Kustomize renders a kustomization folder with bin/kustomize, else bin/kubectl, else the
// first of them on PATH.
func (s *Sandbox) Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	var cmd *exec.Cmd
	switch {
	case isFile(filepath.Join(s.opts.BinDir, "kustomize")):
		cmd = exec.Command(filepath.Join(s.opts.BinDir, "kustomize"), "build", dir)
	case isFile(filepath.Join(s.opts.BinDir, "kubectl")):
		cmd = exec.Command(filepath.Join(s.opts.BinDir, "kubectl"), "kustomize", dir)
	default:
		if p, err := exec.LookPath("kustomize"); err == nil {
			cmd = exec.Command(p, "build", dir)
		} else if p, err := exec.LookPath("kubectl"); err == nil {
			cmd = exec.Command(p, "kustomize", dir)
		} else {
			return nil, fmt.Errorf("render %s: no kustomize or kubectl in %s or on PATH: run 'make kustomize'", dir, s.opts.BinDir)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return decodeYAML(out)
}

// ApplySamples renders config/samples and applies it into namespace (created if missing),
// with server-side apply, ConfigMaps and Secrets first.
func (s *Sandbox) ApplySamples(ctx context.Context, namespace string) error {
	objs, err := s.Kustomize(filepath.Join(s.opts.RepoRoot, "config", "samples"))
	if err != nil {
		return err
	}
	if err := s.ensure(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	first := func(u *unstructured.Unstructured) bool { return u.GetKind() == "ConfigMap" || u.GetKind() == "Secret" }
	for _, pass := range []bool{true, false} {
		for _, u := range objs {
			if first(u) != pass {
				continue
			}
			u.SetNamespace(namespace)
			if err := s.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("captf-sandbox"), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// ensure creates an object unless it exists.
func (s *Sandbox) ensure(ctx context.Context, o client.Object) error {
	if err := s.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
	}
	return nil
}

func decodeYAML(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode yaml: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create folder of %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
