package certmanager_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var cp envtest.Shared

func TestMain(m *testing.M) {
	dir, err := certmanager.CRDDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cp.WithoutCAPTFCRDs = true
	cp.ExtraCRDPaths = []string{dir}
	cp.AddToScheme = append(cp.AddToScheme, cmapi.AddToScheme, apiextensionsv1.AddToScheme)
	cp.Main(m)
}

// issueTimeout bounds each wait for the controllers: issuing and injecting take about a second
// alone; the margin is for a loaded 2-core machine.
const issueTimeout = 2 * time.Minute

// start writes a kubeconfig for the shared control plane and starts the controllers, their log
// in a file that a failed test prints.
func start(t *testing.T) (client.Client, *certmanager.Process) {
	t.Helper()
	env, c := cp.Get(t)
	bin, err := certmanager.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := certmanager.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "controllers.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := certmanager.Start(certmanager.Options{Binary: bin, Kubeconfig: kubeconfig, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(context.Background(), 30*time.Second)
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("cert-manager-controllers log:\n%s", b)
		}
	})
	return c, p
}

func namespace(t *testing.T, c client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// TestTheControllersIssueAServingCertificateAndInjectItsCA builds the chain CAPTF deploys: a
// self-signed ClusterIssuer bootstraps a CA Certificate, a CA Issuer signs the serving
// Certificate, and the webhook configurations and a CRD's conversion webhook that name the
// serving Certificate get its CA as caBundle. Then SIGTERM stops the program cleanly.
func TestTheControllersIssueAServingCertificateAndInjectItsCA(t *testing.T) {
	g := NewWithT(t)
	c, p := start(t)
	ctx := context.Background()
	ns := namespace(t, c, "issue")
	dnsName := "webhook-service." + ns + ".svc"
	createChain(t, c, ns, dnsName)
	injectables := createInjectables(t, c, ns)

	var serving, ca corev1.Secret
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serving-cert"}, &serving)).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ca-cert"}, &ca)).To(Succeed())
		var cert cmapi.Certificate
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serving"}, &cert)).To(Succeed())
		g.Expect(ready(cert.Status.Conditions)).To(BeTrue(), "serving Certificate Ready")
	}).WithTimeout(issueTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())

	// The serving certificate is for the Service's name and chains to the CA Certificate.
	leaf := parseCert(t, serving.Data[corev1.TLSCertKey])
	g.Expect(leaf.DNSNames).To(ConsistOf(dnsName))
	g.Expect(leaf.IsCA).To(BeFalse())
	caCert := parseCert(t, ca.Data[corev1.TLSCertKey])
	g.Expect(caCert.IsCA).To(BeTrue())
	g.Expect(serving.Data[cmmeta.TLSCAKey]).To(Equal(ca.Data[corev1.TLSCertKey]), "serving Secret's ca.crt is the CA")
	g.Expect(verifies(leaf, ca.Data[corev1.TLSCertKey], dnsName)).To(Succeed())

	// Every injectable gets the CA the API server must trust: one that verifies the serving
	// certificate for the Service's name.
	for _, obj := range injectables {
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			bundles := caBundles(obj)
			g.Expect(bundles).NotTo(BeEmpty())
			for _, b := range bundles {
				g.Expect(b).To(Equal(serving.Data[cmmeta.TLSCAKey]))
				g.Expect(verifies(leaf, b, dnsName)).To(Succeed())
			}
		}).WithTimeout(issueTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "caBundle of %T %s", obj, obj.GetName())
	}

	// SIGTERM: the program stops cleanly (exit status 0) within the grace period.
	g.Expect(p.Stop(ctx, 30*time.Second)).To(Succeed())
}

func ready(conds []cmapi.CertificateCondition) bool {
	for _, c := range conds {
		if c.Type == cmapi.CertificateConditionReady {
			return c.Status == cmmeta.ConditionTrue
		}
	}
	return false
}

// createChain creates the self-signed ClusterIssuer, the CA Certificate, the CA Issuer and the
// serving Certificate.
func createChain(t *testing.T, c client.Client, ns, dnsName string) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&cmapi.ClusterIssuer{
			ObjectMeta: metav1.ObjectMeta{Name: "selfsigned-" + ns},
			Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
		},
		&cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
			Spec: cmapi.CertificateSpec{
				IsCA: true, CommonName: "captf-test-ca", SecretName: "ca-cert",
				IssuerRef: cmmeta.IssuerReference{Kind: cmapi.ClusterIssuerKind, Name: "selfsigned-" + ns},
			},
		},
		&cmapi.Issuer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
			Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "ca-cert"}}},
		},
		&cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serving"},
			Spec: cmapi.CertificateSpec{
				DNSNames: []string{dnsName}, SecretName: "serving-cert",
				IssuerRef: cmmeta.IssuerReference{Kind: cmapi.IssuerKind, Name: "ca"},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// createInjectables creates a ValidatingWebhookConfiguration, a MutatingWebhookConfiguration
// and a CRD with a conversion webhook, each annotated to take the serving Certificate's CA.
// Their webhooks select no object, so no request ever reaches them.
func createInjectables(t *testing.T, c client.Client, ns string) []client.Object {
	t.Helper()
	from := map[string]string{certmanager.InjectCAFrom: ns + "/serving"}
	service := func(path string) *admissionv1.ServiceReference {
		return &admissionv1.ServiceReference{Namespace: ns, Name: "webhook-service", Path: &path}
	}
	none := &metav1.LabelSelector{MatchLabels: map[string]string{"captf.test/never": "true"}}
	rules := []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	ignore, sideEffects := admissionv1.Ignore, admissionv1.SideEffectClassNone
	objs := []client.Object{
		&admissionv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "guard-" + ns, Annotations: from},
			Webhooks: []admissionv1.ValidatingWebhook{{
				Name: "guard.captf.test", ClientConfig: admissionv1.WebhookClientConfig{Service: service("/validate")},
				Rules: rules, ObjectSelector: none, FailurePolicy: &ignore, SideEffects: &sideEffects,
				AdmissionReviewVersions: []string{"v1"},
			}},
		},
		&admissionv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults-" + ns, Annotations: from},
			Webhooks: []admissionv1.MutatingWebhook{{
				Name: "defaults.captf.test", ClientConfig: admissionv1.WebhookClientConfig{Service: service("/mutate")},
				Rules: rules, ObjectSelector: none, FailurePolicy: &ignore, SideEffects: &sideEffects,
				AdmissionReviewVersions: []string{"v1"},
			}},
		},
		conversionCRD(ns, from),
	}
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	return objs
}

// conversionCRD is a CRD with two versions converted by a webhook behind the test's Service.
func conversionCRD(ns string, annotations map[string]string) *apiextensionsv1.CustomResourceDefinition {
	group := ns + ".captf.test"
	open := true
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: &open,
	}}
	path := "/convert"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group, Annotations: annotations},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v2", Served: true, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig: &apiextensionsv1.WebhookClientConfig{
						Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: "webhook-service", Path: &path},
					},
					ConversionReviewVersions: []string{"v1"},
				},
			},
		},
	}
}

// caBundles are the caBundles of every webhook of an injectable.
func caBundles(obj client.Object) [][]byte {
	var out [][]byte
	switch o := obj.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *admissionv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *apiextensionsv1.CustomResourceDefinition:
		if cv := o.Spec.Conversion; cv != nil && cv.Webhook != nil && cv.Webhook.ClientConfig != nil {
			out = append(out, cv.Webhook.ClientConfig.CABundle)
		}
	}
	var filled [][]byte
	for _, b := range out {
		if len(b) > 0 {
			filled = append(filled, b)
		}
	}
	if len(filled) < len(out) {
		return nil // one webhook without a CA is not injected yet
	}
	return filled
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM block in %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// verifies checks leaf as a TLS server certificate for dnsName against the roots in bundle.
func verifies(leaf *x509.Certificate, bundle []byte, dnsName string) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("no certificate in the bundle")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestTheControllersStopWhenTheirParentDies starts the program from a shell, kills the shell
// with SIGKILL (no signal reaches the program), and sees the program exit by itself.
func TestTheControllersStopWhenTheirParentDies(t *testing.T) {
	g := NewWithT(t)
	env, _ := cp.Get(t)
	bin, err := certmanager.Binary()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(certmanager.WriteKubeconfig(env.Config, kubeconfig)).To(Succeed())

	// The shell prints the program's pid, then waits for it; the program's log goes to a file.
	shell := exec.Command("sh", "-c", `"$0" --kubeconfig "$1" >"$2" 2>&1 & echo $!; wait`,
		bin, kubeconfig, filepath.Join(dir, "controllers.log"))
	stdout, err := shell.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shell.Start()).To(Succeed())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// It runs: the log shows the controllers and the injectors starting.
	g.Eventually(func() ([]byte, error) { return os.ReadFile(filepath.Join(dir, "controllers.log")) }).
		WithTimeout(issueTimeout).WithPolling(200 * time.Millisecond).Should(ContainSubstring("Starting Controller"))
	g.Expect(running(pid)).To(BeTrue())

	g.Expect(shell.Process.Kill()).To(Succeed())
	_ = shell.Wait()
	g.Eventually(func() bool { return running(pid) }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
		Should(BeFalse(), "cert-manager-controllers outlived its parent")
	log, _ := os.ReadFile(filepath.Join(dir, "controllers.log"))
	g.Expect(log).To(ContainSubstring("parent process is gone"))
}

// running is whether pid is a live process (not gone, not a zombie waiting to be reaped).
func running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}
