package deploy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	testobjects "github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

const (
	releaseTag   = "v0.1.0"
	testImage    = "registry.example.com/captf/manager:test-1"
	systemNS     = "captf-system"
	managerSA    = "captf-controller-manager"
	samplesNS    = "demo"
	fieldManager = "captf-deploy-test"
)

// The variable flags of config/clusterctl; every other flag must equal config/default's.
var variableFlags = []string{"runner-image", "runtime-image", "concurrency"}

// clusterctlRepository lays out a local clusterctl provider repository holding the output of
// `make release-manifests`, and a clusterctl config file that points at it.
func clusterctlRepository(dir string) (configFile string) {
	out := filepath.Join(dir, "out")
	_, err := run(repo, cleanEnv(), "make", "-s", "release-manifests", "RELEASE_DIR="+out, "RELEASE_TAG="+releaseTag)
	Expect(err).NotTo(HaveOccurred())
	version := filepath.Join(dir, "repository", "infrastructure-terraform", releaseTag)
	Expect(os.MkdirAll(version, 0o755)).To(Succeed())
	for _, f := range []string{"infrastructure-components.yaml", "metadata.yaml", "cluster-template.yaml", "cluster-template-topology.yaml", "clusterclass-captf.yaml"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		Expect(err).NotTo(HaveOccurred(), "make release-manifests did not write %s", f)
		Expect(os.WriteFile(filepath.Join(version, f), b, 0o644)).To(Succeed())
	}
	configFile = filepath.Join(dir, "clusterctl.yaml")
	Expect(os.WriteFile(configFile, fmt.Appendf(nil, `providers:
- name: terraform
  type: InfrastructureProvider
  url: file://%s
`, filepath.Join(version, "infrastructure-components.yaml")), 0o644)).To(Succeed())
	return configFile
}

// generateCluster runs clusterctl generate cluster name from the release in the repository of
// configFile, into namespace (Kubernetes v1.36.0, more flags in extra), checks every variable
// was substituted and every object is in namespace, and returns the objects and a count of
// their kinds.
func generateCluster(home, configFile, name, namespace string, extra ...string) (objects, map[string]int) {
	GinkgoHelper()
	args := append([]string{"generate", "cluster", name, "--infrastructure", "terraform:" + releaseTag, "--config", configFile,
		"--target-namespace", namespace, "--kubernetes-version", "v1.36.0"}, extra...)
	out, err := clusterctl(home, nil, args...)
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(string(out)).NotTo(ContainSubstring("${"), "a variable was left unsubstituted")
	decoded, err := decode(out)
	Expect(err).NotTo(HaveOccurred())
	objs := objects(decoded)
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		Expect(u.GetNamespace()).To(Equal(namespace), "%s %s", u.GetKind(), u.GetName())
	}
	return objs, kinds
}

// clusterctl runs bin/clusterctl with its own home, so no user configuration leaks in.
func clusterctl(home string, extraEnv []string, args ...string) ([]byte, error) {
	bin, err := tool("clusterctl")
	if err != nil {
		return nil, err
	}
	env := cleanEnv(append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, extraEnv...)...)
	return run(home, env, bin, args...)
}

// apply installs objects the way clusterctl does: the namespace and the CRDs first (waiting
// until they are served), then everything else, with server-side apply.
func apply(objs objects) {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	for pass := 0; pass <= 2; pass++ {
		for _, u := range objs {
			if rank(u) != pass {
				continue
			}
			Expect(admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership)).
				To(Succeed(), "apply %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
			if u.GetKind() == "CustomResourceDefinition" {
				Eventually(func(g Gomega) {
					var crd apiextensionsv1.CustomResourceDefinition
					g.Expect(admin.Get(ctx, types.NamespacedName{Name: u.GetName()}, &crd)).To(Succeed())
					established := false
					for _, c := range crd.Status.Conditions {
						established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
					}
					g.Expect(established).To(BeTrue(), "CRD %s not established", crd.Name)
				}).WithTimeout(20 * time.Second).Should(Succeed())
			}
		}
	}
}

// asServiceAccount is the manager's identity: the API server authorizes it with the RBAC that
// clusterctl installed.
func asServiceAccount(c *rest.Config) *rest.Config {
	sa := rest.CopyConfig(c)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + systemNS + ":" + managerSA,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNS, "system:authenticated"},
	}
	return sa
}

func probe(addr, path string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// servedSerial dials the webhook server as the API server does (trusting only the CA) and
// returns the serial of the certificate it presents.
func servedSerial(addr string, ca []byte) (*big.Int, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// pointWebhooksAt makes the installed configurations call the in-process webhook server (the
// test's stand-in for the Service): only clientConfig changes; rules, matchConditions,
// timeouts and failure policies stay as installed. cert-manager's cainjector fills their
// caBundle with ca, the CA of the issued serving certificate, as in a cluster.
func pointWebhooksAt(base string, ca []byte) {
	GinkgoHelper()
	toURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.Service != nil {
			cc.URL = ptr.To(base + ptr.Deref(cc.Service.Path, "/"))
			cc.Service = nil
		}
	}
	var vs admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(admin.List(ctx, &vs, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
	Expect(vs.Items).NotTo(BeEmpty())
	for _, x := range vs.Items {
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			if err := admin.Get(ctx, types.NamespacedName{Name: x.Name}, &v); err != nil {
				return err
			}
			for j := range v.Webhooks {
				toURL(&v.Webhooks[j].ClientConfig)
			}
			return admin.Update(ctx, &v)
		})).To(Succeed())
	}
	var ms admissionregistrationv1.MutatingWebhookConfigurationList
	Expect(admin.List(ctx, &ms, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
	for _, x := range ms.Items {
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var m admissionregistrationv1.MutatingWebhookConfiguration
			if err := admin.Get(ctx, types.NamespacedName{Name: x.Name}, &m); err != nil {
				return err
			}
			for j := range m.Webhooks {
				toURL(&m.Webhooks[j].ClientConfig)
			}
			return admin.Update(ctx, &m)
		})).To(Succeed())
	}
	waitCAInjected(ca)
}

var _ = Describe("CAPTF installed through clusterctl from a local provider repository", Ordered, func() {
	var (
		dir, home, configFile string
		generated             objects
		generatedYAML         string
		certDir, probeAddr    string
		webhookAddr           string
		ca                    []byte
		serial                *big.Int
		stopManager           func()
		stopCertManager       func()
	)

	BeforeAll(func() {
		dir = GinkgoT().TempDir()
		home = filepath.Join(dir, "home")
		Expect(os.MkdirAll(home, 0o755)).To(Succeed())
		configFile = clusterctlRepository(dir)
		stopCertManager = startCertManager(dir)
	})

	AfterAll(func() {
		if stopManager != nil {
			stopManager()
		}
		if stopCertManager != nil {
			stopCertManager()
		}
	})

	It("renders the plain cluster flavor from the release with clusterctl generate cluster", func() {
		objs, kinds := generateCluster(home, configFile, "fl", "flavor", "--worker-machine-count", "2")
		Expect(kinds).To(Equal(map[string]int{"Cluster": 1, "TerraformCluster": 1, "Secret": 1, "Machine": 1, "TerraformMachine": 1,
			"TerraformMachineTemplate": 1, "MachineDeployment": 1}))
		md := objs.find("MachineDeployment", "flavor", "fl-md-0")
		Expect(md).NotTo(BeNil())
		replicas, _, err := unstructured.NestedFieldNoCopy(md.Object, "spec", "replicas")
		Expect(err).NotTo(HaveOccurred())
		Expect(replicas).To(BeNumerically("==", 2))
		cp := objs.find("Machine", "flavor", "fl-control-plane-0")
		Expect(cp).NotTo(BeNil())
		Expect(cp.GetLabels()).To(HaveKey("cluster.x-k8s.io/control-plane"))
	})

	It("renders 0 workers and 1 control plane machine when no count is given, as docs/flavors.md says", func() {
		// clusterctl always sets WORKER_MACHINE_COUNT (0 unless a flag or the variable says
		// otherwise), so the templates' own default of 1 never applies through clusterctl.
		objs, _ := generateCluster(home, configFile, "df", "flavor")
		md := objs.find("MachineDeployment", "flavor", "df-md-0")
		Expect(md).NotTo(BeNil())
		replicas, _, err := unstructured.NestedFieldNoCopy(md.Object, "spec", "replicas")
		Expect(err).NotTo(HaveOccurred())
		Expect(replicas).To(BeNumerically("==", 0))
		objs, _ = generateCluster(home, configFile, "dt", "topology", "--flavor", "topology")
		cl := objs.find("Cluster", "topology", "dt")
		Expect(cl).NotTo(BeNil())
		mds, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "workers", "machineDeployments")
		Expect(mds).To(HaveLen(1))
		Expect(mds[0]).To(HaveKeyWithValue("replicas", BeNumerically("==", 0)))
		cp, _, _ := unstructured.NestedFieldNoCopy(cl.Object, "spec", "topology", "controlPlane", "replicas")
		Expect(cp).To(BeNumerically("==", 1))
	})

	It("renders the ClusterClass flavor from the release, adding the class clusterctl finds in the repository", func() {
		objs, kinds := generateCluster(home, configFile, "cc", "topology", "--flavor", "topology", "--worker-machine-count", "3")
		Expect(kinds).To(Equal(map[string]int{"Cluster": 1, "ClusterClass": 1, "TerraformClusterTemplate": 1, "KubeadmControlPlaneTemplate": 1,
			"TerraformMachineTemplate": 2, "KubeadmConfigTemplate": 1, "TerraformMachinePoolTemplate": 1}))
		cl := objs.find("Cluster", "topology", "cc")
		Expect(cl).NotTo(BeNil())
		class, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "classRef", "name")
		Expect(class).To(Equal("captf"))
		mds, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "workers", "machineDeployments")
		Expect(mds).To(HaveLen(1))
		Expect(mds[0]).To(HaveKeyWithValue("replicas", BeNumerically("==", 3)))
		// Every template the class names is in the output, so one kubectl apply makes the cluster.
		cc := objs.find("ClusterClass", "topology", "captf")
		Expect(cc).NotTo(BeNil())
		refs := templateRefs(cc)
		Expect(refs).To(HaveLen(7))
		for _, ref := range refs {
			Expect(objs.find(ref.kind, "topology", ref.name)).NotTo(BeNil(), "the class names %s %s", ref.kind, ref.name)
		}
	})

	It("renders the components with their variables substituted", func() {
		out, err := clusterctl(home, []string{"CAPTF_IMAGE=" + testImage}, "generate", "provider", "--infrastructure", "terraform", "--config", configFile)
		Expect(err).NotTo(HaveOccurred())
		generatedYAML = string(out)
		Expect(generatedYAML).NotTo(ContainSubstring("${"), "a variable was left unsubstituted")
		Expect(generatedYAML).NotTo(ContainSubstring("CAPTF_RELEASE_IMAGE"), "make release-manifests left its placeholder")
		generated, err = decode(out)
		Expect(err).NotTo(HaveOccurred())

		checkLabels(generated)
		for _, u := range generated {
			Expect(u.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io"), "clusterctl did not take %s %s as a component", u.GetKind(), u.GetName())
		}
		checkWebhooks(generated)
		checkMatchConditions(generated)
		checkManager(generated)
		checkPlanPolicy(generated)
		checkNamespacePolicy(generated)

		_, c, err := managerDeployment(generated)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Image).To(Equal(testImage))
		Expect(c.Args).To(ContainElement("--runner-image=" + testImage))
		Expect(c.Args).To(ContainElement("--runtime-image=" + jobs.DefaultRuntimeImage))
		Expect(c.Args).To(ContainElement("--concurrency=4"))

		// Besides the variables, the release runs the manager exactly as config/default does.
		def, err := kustomizeBuild("config/default")
		Expect(err).NotTo(HaveOccurred())
		_, dc, err := managerDeployment(def)
		Expect(err).NotTo(HaveOccurred())
		strip := func(args []string) []string {
			var out []string
			for _, a := range args {
				keep := true
				for _, f := range variableFlags {
					keep = keep && !strings.HasPrefix(a, "--"+f+"=")
				}
				if keep {
					out = append(out, a)
				}
			}
			return out
		}
		Expect(strip(c.Args)).To(Equal(strip(dc.Args)))

		// The release series of the tag implements the contract of this Cluster API.
		meta, err := os.ReadFile(filepath.Join(dir, "out", "metadata.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var md struct {
			APIVersion    string `json:"apiVersion"`
			Kind          string `json:"kind"`
			ReleaseSeries []struct {
				Major, Minor int32
				Contract     string
			} `json:"releaseSeries"`
		}
		Expect(yaml.Unmarshal(meta, &md)).To(Succeed())
		Expect(md.Kind).To(Equal("Metadata"))
		Expect(md.APIVersion).To(Equal("clusterctl.cluster.x-k8s.io/v1alpha3"))
		contract := ""
		for _, rs := range md.ReleaseSeries {
			if fmt.Sprintf("v%d.%d.", rs.Major, rs.Minor) == releaseTag[:len("v0.1.")] {
				contract = rs.Contract
			}
		}
		Expect(contract).To(Equal(clusterv1.GroupVersion.Version), "metadata.yaml: contract of the %s series", releaseTag)

		// Without the variable, the default names the release.
		out, err = clusterctl(home, nil, "generate", "provider", "--infrastructure", "terraform", "--config", configFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("image: ghcr.io/captf/cluster-api-provider-terraform:" + releaseTag))
	})

	It("applies to a control plane with cert-manager's CRDs and controllers", func() {
		Expect(generated).NotTo(BeEmpty())
		apply(forLoopback(generated))

		var crds apiextensionsv1.CustomResourceDefinitionList
		Expect(admin.List(ctx, &crds, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		Expect(crds.Items).To(HaveLen(8), "the three kinds, their three templates, TerraformPlanPolicy and TerraformIdentity")
		var vs admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(admin.List(ctx, &vs, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		Expect(vs.Items).NotTo(BeEmpty())
		var ms admissionregistrationv1.MutatingWebhookConfigurationList
		Expect(admin.List(ctx, &ms, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		Expect(ms.Items).NotTo(BeEmpty())
		for _, x := range vs.Items {
			Expect(x.Annotations).To(HaveKeyWithValue(injectCAAnnotation, systemNS+"/captf-serving-cert"))
		}
		// The plan-approval policy, the three namespace-deletion policies and the
		// template-immutability policy (cluster-scoped, although clusterctl gives them a
		// namespace), and the plan approvers' ConfigMap.
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		Expect(admin.List(ctx, &vaps, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		Expect(vaps.Items).To(HaveLen(5))
		var vapbs admissionregistrationv1.ValidatingAdmissionPolicyBindingList
		Expect(admin.List(ctx, &vapbs, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		Expect(vapbs.Items).To(HaveLen(5))
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: webhooks.PlanApproversConfigMap}, &corev1.ConfigMap{})).To(Succeed())
		for _, kind := range []string{"Certificate", "Issuer"} {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("cert-manager.io/v1")
			list.SetKind(kind + "List")
			Expect(admin.List(ctx, list, client.InNamespace(systemNS))).To(Succeed())
			Expect(list.Items).To(HaveLen(2), "%ss in %s", kind, systemNS)
		}
		var cert unstructured.Unstructured
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: "captf-serving-cert"}, &cert)).To(Succeed())
		var dep unstructured.Unstructured
		dep.SetAPIVersion("apps/v1")
		dep.SetKind("Deployment")
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: "captf-controller-manager"}, &dep)).To(Succeed())
	})

	It("runs the manager under the installed RBAC: not ready before its certificate exists, ready after", func() {
		certDir = filepath.Join(dir, "serving-certs")
		Expect(os.MkdirAll(certDir, 0o755)).To(Succeed())
		pp, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		wp, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		probeAddr = "127.0.0.1:" + strconv.Itoa(pp)
		webhookAddr = "127.0.0.1:" + strconv.Itoa(wp)

		// The identity the Deployment passes, resolved from its downward API: the
		// ServiceAccount the test impersonates.
		d, c, err := managerDeployment(generated)
		Expect(err).NotTo(HaveOccurred())
		identity, err := managerIdentity(d, c)
		Expect(err).NotTo(HaveOccurred())
		Expect(identity).To(Equal(systemNS + "/" + managerSA))
		mgr, err := setup.New(asServiceAccount(cfg), setup.Options{
			ManagerServiceAccount:   identity,
			MetricsAddr:             "0",
			ProbeAddr:               probeAddr,
			LeaderElection:          true,
			LeaderElectionNamespace: systemNS,
			EnableWebhooks:          true,
			WebhookPort:             wp,
			WebhookCertDir:          certDir,
			RunnerImage:             testImage,
		}, func(o *manager.Options) { o.GracefulShutdownTimeout = ptr.To(5 * time.Second) })
		Expect(err).NotTo(HaveOccurred())
		mctx, mcancel := contextWithCancel()
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		stopManager = func() {
			mcancel()
			Eventually(done).WithTimeout(30 * time.Second).Should(Receive(Not(HaveOccurred())))
		}

		Eventually(func() (int, error) { return probe(probeAddr, "/healthz") }).WithTimeout(20 * time.Second).Should(Equal(http.StatusOK))
		// The manager is up and elected, yet not ready: no certificate.
		Consistently(func() (int, error) { return probe(probeAddr, "/readyz") }).
			WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).ShouldNot(Equal(http.StatusOK))
		_, err = servedSerial(webhookAddr, nil)
		Expect(err).To(HaveOccurred(), "the webhook server completed a handshake without a certificate")

		// cert-manager issues the release's serving Certificate from its CA Issuer; the test
		// copies the Secret where the Deployment mounts it.
		secret, s := issued(nil)
		serial = s
		written := time.Now()
		ca = copyIssued(certDir, secret)
		Eventually(func() (int, error) { return probe(probeAddr, "/readyz") }).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(http.StatusOK))
		fmt.Fprintf(GinkgoWriter, "ready %v after the certificate was written\n", time.Since(written).Round(time.Millisecond))
		Expect(servedSerial(webhookAddr, ca)).To(Equal(serial))
	})

	It("serves admission through the installed webhook configurations", func() {
		Expect(ca).NotTo(BeNil())
		pointWebhooksAt("https://"+webhookAddr, ca)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: samplesNS}})).To(Succeed())

		// Defaulting (mutating): a short deadline gets a lock timeout below it. Without the
		// webhook the schema would refuse the default lock timeout of 300 s.
		short := testobjects.Cluster(samplesNS, "short").Spec(func(s *infrav1.TerraformSpec) {
			s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "sample-cluster-module"}}
			s.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
		}).Obj()
		Eventually(func() error { return admin.Create(ctx, short) }).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(short.Spec.Job.LockTimeoutSeconds).To(HaveValue(BeEquivalentTo(60)))

		// Validation: a reserved environment variable is refused by the webhook.
		bad := testobjects.Machine(samplesNS, "bad").Spec(func(s *infrav1.TerraformSpec) {
			s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}
			s.Job.Env = []corev1.EnvVar{{Name: "CAPTF_JOB_NAME", Value: "x"}}
		}).Obj()
		err := admin.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("denied the request"))
		Expect(err.Error()).To(ContainSubstring("reserved"))
	})

	It("creates the samples and reconciles them under the installed RBAC", func() {
		samples, err := kustomizeBuild("config/samples")
		Expect(err).NotTo(HaveOccurred())
		for _, u := range samples {
			u.SetNamespace(samplesNS)
		}
		apply(samples)

		// The manager, as its service account, created the runner's RBAC (it may grant only
		// what it holds itself: the sample cluster's own account, Role and RoleBinding) and
		// started an apply Job for the sample cluster.
		runner := naming.RunnerServiceAccountName(naming.StateSuffix(samplesNS, infrav1.TerraformClusterKind, "sample"))
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: samplesNS, Name: runner}, &rbacv1.Role{})).To(Succeed())
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: samplesNS, Name: runner}, &rbacv1.RoleBinding{})).To(Succeed())
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: samplesNS, Name: runner}, &corev1.ServiceAccount{})).To(Succeed())
			var js batchv1.JobList
			g.Expect(admin.List(ctx, &js, client.InNamespace(samplesNS), client.MatchingLabels{
				infrav1.OwnerKindLabel: infrav1.TerraformClusterKind, infrav1.OwnerNameLabel: "sample"})).To(Succeed())
			g.Expect(js.Items).NotTo(BeEmpty(), "no Job for TerraformCluster sample yet")
			g.Expect(js.Items[0].Spec.Template.Spec.InitContainers[0].Image).To(Equal(testImage))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("guards a TerraformCluster in the manager's own namespace like any other (no namespace is exempt)", func() {
		// The samples again, in captf-system: the controller reconciles CAPTF's kinds there too,
		// so the guards must apply there too.
		samples, err := kustomizeBuild("config/samples")
		Expect(err).NotTo(HaveOccurred())
		for _, u := range samples {
			u.SetNamespace(systemNS)
		}
		apply(samples)
		var job batchv1.Job
		Eventually(func(g Gomega) {
			var js batchv1.JobList
			g.Expect(admin.List(ctx, &js, client.InNamespace(systemNS), client.MatchingLabels{
				infrav1.OwnerKindLabel: infrav1.TerraformClusterKind, infrav1.OwnerNameLabel: "sample"})).To(Succeed())
			g.Expect(js.Items).NotTo(BeEmpty(), "no Job for TerraformCluster %s/sample yet", systemNS)
			job = js.Items[0]
			var tc infrav1.TerraformCluster
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: "sample"}, &tc)).To(Succeed())
			g.Expect(tc.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
			g.Expect(tc.Status.ActiveJob).NotTo(BeNil())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// envtest runs no Job controller: a Job without status has not finished, so it runs.

		tc := testobjects.Cluster(systemNS, "sample").Obj()
		for what, patch := range map[string]string{
			"remove block-move":     `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`,
			"remove the finalizers": `{"metadata":{"finalizers":null}}`,
		} {
			err := admin.Patch(ctx, tc, client.RawPatch(types.MergePatchType, []byte(patch)))
			Expect(err).To(HaveOccurred(), "%s in %s while Job %s runs", what, systemNS, job.Name)
			Expect(err.Error()).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`), what)
			Expect(err.Error()).To(ContainSubstring("Job "+job.Name), what)
		}
		err = admin.Status().Patch(ctx, tc, client.RawPatch(types.MergePatchType, []byte(`{"status":{"activeJob":null}}`)))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`))

		By("the run lease and the Job are guarded there too")
		var leases coordinationv1.LeaseList
		Expect(admin.List(ctx, &leases, client.InNamespace(systemNS), client.MatchingLabels{
			infrav1.LeaseLabel: infrav1.LeaseKindRun, infrav1.OwnerNameLabel: "sample"})).To(Succeed())
		Expect(leases.Items).To(HaveLen(1))
		err = admin.Delete(ctx, &leases.Items[0])
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "lease-guard.captf.io" denied the request`))
		err = admin.Patch(ctx, &job, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"captf.io/owner-name":"other"}}}`)))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "job-guard.captf.io" denied the request`))
		fmt.Fprintf(GinkgoWriter, "in %s, removing block-move, the finalizer and activeJob, deleting the run lease and relabelling the Job were all denied while Job %s runs\n", systemNS, job.Name)
	})

	It("serves a certificate cert-manager re-issued within 10 s while admission requests flow, and none fails", func() {
		Expect(ca).NotTo(BeNil())
		first, err := servedSerial(webhookAddr, ca)
		Expect(err).NotTo(HaveOccurred())

		var ok, failed atomic.Int64
		var firstErr atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		record := func(err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			ok.Add(1)
		}
		// Creates go through defaulting and validation; spec patches through validation.
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if w%2 == 0 {
						m := testobjects.Machine(samplesNS, fmt.Sprintf("load-%d-%d", w, i)).Cluster("load").Spec(func(s *infrav1.TerraformSpec) {
							s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "sample-machine-module"}}
						}).Obj()
						record(admin.Create(ctx, m, client.DryRunAll))
					} else {
						patch := fmt.Appendf(nil, `{"spec":{"variables":{"api_server_port":%d}}}`, 6000+i%100)
						record(admin.Patch(ctx, testobjects.Cluster(samplesNS, "short").Obj(),
							client.RawPatch(types.MergePatchType, patch), client.DryRunAll))
					}
				}
			}()
		}
		Eventually(ok.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 50))

		// A change of the Certificate's spec makes cert-manager issue it again, as a renewal
		// does; the CA Issuer signs it with the same CA, so the caBundle stays.
		asked := time.Now()
		reissue("rotated.captf.test")
		secret, second := issued(serial)
		reissued := time.Since(asked)
		rotated := time.Now()
		Expect(copyIssued(certDir, secret)).To(Equal(ca))
		Eventually(func() (*big.Int, error) { return servedSerial(webhookAddr, ca) }).
			WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(second))
		took := time.Since(rotated)
		before := ok.Load()
		Eventually(ok.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", before+100))
		close(stop)
		wg.Wait()
		Expect(failed.Load()).To(BeZero(), "admission requests failed during the rotation, first: %v", firstErr.Load())
		Expect(second).NotTo(Equal(first))
		serial = second
		fmt.Fprintf(GinkgoWriter, "cert-manager re-issued the certificate %v after the spec changed; served %v after the copy; %d admission requests, 0 failed\n",
			reissued.Round(time.Millisecond), took.Round(time.Millisecond), ok.Load())
	})

	It("used only permissions docs/permissions.md lists as used, and was never refused", func() {
		// Everything above ran the manager as its ServiceAccount: start, leader election,
		// informers, admission, reconciling the samples. The API server's audit log says
		// which permissions that took.
		observed, forbidden, err := observedPermissions(auditLog, "system:serviceaccount:"+systemNS+":"+managerSA)
		Expect(err).NotTo(HaveOccurred())
		Expect(observed).NotTo(BeEmpty(), "the audit log has no request of the manager")
		Expect(forbidden).To(BeEmpty(), "the installed RBAC refused the manager")
		used, unused, _, err := documentedPermissions(filepath.Join(repo, "docs", "permissions.md"))
		Expect(err).NotTo(HaveOccurred())
		anyRole := func(m map[permission]bool, p permission) bool {
			for q := range m {
				if q.group == p.group && q.resource == p.resource && q.verb == p.verb {
					return true
				}
			}
			return false
		}
		var lines []string
		for p, n := range observed {
			lines = append(lines, fmt.Sprintf("%s x%d", p, n))
			Expect(anyRole(used, p)).To(BeTrue(), "the manager used %s, which docs/permissions.md does not list as used", p)
			Expect(anyRole(unused, p)).To(BeFalse(), "the manager used %s, which docs/permissions.md lists as unused", p)
		}
		slices.Sort(lines)
		fmt.Fprintf(GinkgoWriter, "permissions the manager used in this run (%d):\n  %s\n", len(observed), strings.Join(lines, "\n  "))
	})
})
