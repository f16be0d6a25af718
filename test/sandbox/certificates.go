package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/certs"
	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/capimanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// certManagerGroup is the API group of cert-manager's Issuers and Certificates.
const certManagerGroup = "cert-manager.io"

// certificateTimeout bounds the wait for cert-manager to issue every serving certificate and
// for its cainjector to fill every caBundle: about two seconds alone; the margin is for a
// loaded 2-core machine.
const certificateTimeout = 2 * time.Minute

// ServingCertificate is a webhook serving certificate the sandbox has cert-manager issue: the
// Certificate, the Secret cert-manager writes, the webhook configurations cert-manager's
// cainjector fills from it (cert-manager.io/inject-ca-from), and the folder the sandbox copies
// the Secret's tls.crt, tls.key and ca.crt into for the manager that serves the webhooks.
type ServingCertificate struct {
	Namespace, Name string
	SecretName      string
	Dir             string
	Validating      string
	Mutating        string

	// copied is closed once the Secret was first copied into Dir.
	copied   chan struct{}
	mu       sync.Mutex
	lastCert []byte
}

// ServingCertificates are the CAPTF manager's serving certificate first, then each Cluster API
// manager's.
func (s *Sandbox) ServingCertificates() []*ServingCertificate {
	return append([]*ServingCertificate(nil), s.serving...)
}

// startCertManager runs cert-manager's own controllers (package certmanager) against the
// control plane as the administrator. The process stops with Stop, and by itself when this
// process is gone; the guard records it too.
func (s *Sandbox) startCertManager() error {
	bin := filepath.Join(s.opts.BinDir, certmanager.BinaryName)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("start cert-manager: %s not found: run 'make cert-manager-bin': %w", bin, err)
	}
	out := s.opts.KubeControllersOutput
	if out == nil {
		out = io.Discard
	}
	s.certManagerOut = proc.Prefixed(out, "[cert-manager] ")
	p, err := certmanager.Start(certmanager.Options{Binary: bin, Kubeconfig: s.opts.KubeconfigPath, Out: s.certManagerOut})
	if err != nil {
		_ = s.certManagerOut.Close()
		return fmt.Errorf("start cert-manager: %w", err)
	}
	s.certManager = p
	if err := proc.GuardChildren(10 * time.Second); err != nil {
		return fmt.Errorf("guard cert-manager: %w", err)
	}
	return nil
}

// stopCertManager stops the copies of the issued Secrets and cert-manager's controllers.
func (s *Sandbox) stopCertManager() error {
	if s.stopCopies != nil {
		s.stopCopies()
		s.copies.Wait()
	}
	if s.certManager == nil {
		return nil
	}
	err := s.certManager.Stop(context.Background(), 15*time.Second)
	_ = s.certManagerOut.Close()
	if err != nil {
		return fmt.Errorf("stop cert-manager: %w", err)
	}
	return nil
}

// StopCertManager stops cert-manager's controllers, as an outage of cert-manager would: nothing
// is issued, renewed or injected until StartCertManager, while the manager keeps serving the
// certificate last copied and the copies of the issued Secrets keep watching. Neither runs
// concurrently with Stop.
func (s *Sandbox) StopCertManager(ctx context.Context) error {
	if s.certManager == nil {
		return errors.New("stop cert-manager: it is not running")
	}
	err := s.certManager.Stop(ctx, 15*time.Second)
	_ = s.certManagerOut.Close()
	s.certManager = nil
	if err != nil {
		return fmt.Errorf("stop cert-manager: %w", err)
	}
	return nil
}

// StartCertManager starts cert-manager's controllers again after StopCertManager.
func (s *Sandbox) StartCertManager() error {
	if s.certManager != nil {
		return errors.New("start cert-manager: it is running")
	}
	return s.startCertManager()
}

// CertManagerPid is the process id of cert-manager's controllers (0 while they are stopped).
func (s *Sandbox) CertManagerPid() int {
	if s.certManager == nil {
		return 0
	}
	return s.certManager.Pid()
}

// installIssuedWebhooks creates the cert-manager objects of certObjs (Issuers and
// Certificates) and the webhook configurations of webhookObjs under the given names, pointed at
// the local webhook server on port. The configurations name their serving Certificate with
// cert-manager.io/inject-ca-from; that Certificate is issued for the loopback names the
// webhooks are served on (forLoopback), and its Secret is to be copied into dir.
func (s *Sandbox) installIssuedWebhooks(ctx context.Context, certObjs, webhookObjs []*unstructured.Unstructured, port int, dir, validatingName, mutatingName string) error {
	from, err := injectCAFrom(webhookObjs)
	if err != nil {
		return fmt.Errorf("webhook configurations %s, %s: %w", validatingName, mutatingName, err)
	}
	sc := &ServingCertificate{Dir: dir, Validating: validatingName, Mutating: mutatingName, copied: make(chan struct{})}
	sc.Namespace, sc.Name, _ = strings.Cut(from, "/")
	var found bool
	for _, u := range certObjs {
		if u.GroupVersionKind().Group != certManagerGroup {
			continue
		}
		if u.GetKind() == "Certificate" && u.GetNamespace() == sc.Namespace && u.GetName() == sc.Name {
			if sc.SecretName, err = forLoopback(u); err != nil {
				return fmt.Errorf("certificate %s: %w", from, err)
			}
			found = true
		}
		if err := s.ensure(ctx, u); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("webhook configurations %s, %s: no Certificate %s to take the CA from", validatingName, mutatingName, from)
	}
	if err := s.installWebhookConfigurations(ctx, webhookObjs, port, validatingName, mutatingName); err != nil {
		return err
	}
	s.serving = append(s.serving, sc)
	return nil
}

// injectCAFrom is the one Certificate the webhook configurations of objs take their CA from.
func injectCAFrom(objs []*unstructured.Unstructured) (string, error) {
	var from string
	for _, u := range objs {
		if k := u.GetKind(); k != "ValidatingWebhookConfiguration" && k != "MutatingWebhookConfiguration" {
			continue
		}
		v := u.GetAnnotations()[certmanager.InjectCAFrom]
		if v == "" || !strings.Contains(v, "/") {
			return "", fmt.Errorf("%s %s has no %s annotation naming <namespace>/<certificate>", u.GetKind(), u.GetName(), certmanager.InjectCAFrom)
		}
		if from != "" && from != v {
			return "", fmt.Errorf("the configurations name two Certificates, %s and %s", from, v)
		}
		from = v
	}
	if from == "" {
		return "", errors.New("no webhook configuration")
	}
	return from, nil
}

// forLoopback is the sandbox's one change to a serving Certificate as its project ships it: the
// webhooks are served on the host, so the certificate is also for localhost and 127.0.0.1,
// besides the Service names it already carries. It returns the Certificate's Secret.
func forLoopback(cert *unstructured.Unstructured) (string, error) {
	dnsNames, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if err != nil {
		return "", fmt.Errorf("read dnsNames: %w", err)
	}
	ips, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "ipAddresses")
	if err != nil {
		return "", fmt.Errorf("read ipAddresses: %w", err)
	}
	if err := unstructured.SetNestedStringSlice(cert.Object, append(dnsNames, "localhost"), "spec", "dnsNames"); err != nil {
		return "", fmt.Errorf("set dnsNames: %w", err)
	}
	if err := unstructured.SetNestedStringSlice(cert.Object, append(ips, "127.0.0.1"), "spec", "ipAddresses"); err != nil {
		return "", fmt.Errorf("set ipAddresses: %w", err)
	}
	secret, _, err := unstructured.NestedString(cert.Object, "spec", "secretName")
	if err != nil || secret == "" {
		return "", fmt.Errorf("no spec.secretName: %v", err)
	}
	return secret, nil
}

// capiCertificates reads a Cluster API manager's config/certmanager/certificate.yaml from the
// module and gives its objects the names that manager's config/default kustomization gives
// them (namespace, name prefix, the webhook Service's DNS names).
func capiCertificates(module string, p capimanager.Provider) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(module, filepath.FromSlash(p.ConfigDir), "certmanager", "certificate.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the certificate of %s: %w", p.Name, err)
	}
	objs, err := decodeYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	prefix := p.WebhookConfigurationPrefix + "-"
	service := strings.NewReplacer("SERVICE_NAME", prefix+"webhook-service", "SERVICE_NAMESPACE", p.Namespace)
	for _, u := range objs {
		u.SetNamespace(p.Namespace)
		u.SetName(prefix + u.GetName())
		if u.GetKind() != "Certificate" {
			continue
		}
		if issuer, ok, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name"); ok {
			if err := unstructured.SetNestedField(u.Object, prefix+issuer, "spec", "issuerRef", "name"); err != nil {
				return nil, fmt.Errorf("rename the issuer of %s: %w", path, err)
			}
		}
		names, _, err := unstructured.NestedStringSlice(u.Object, "spec", "dnsNames")
		if err != nil {
			return nil, fmt.Errorf("read the dnsNames of %s: %w", path, err)
		}
		for i := range names {
			names[i] = service.Replace(names[i])
		}
		if err := unstructured.SetNestedStringSlice(u.Object, names, "spec", "dnsNames"); err != nil {
			return nil, fmt.Errorf("set the dnsNames of %s: %w", path, err)
		}
	}
	return objs, nil
}

// annotateInjectCAFrom names the one Certificate of certObjs on the webhook configurations of
// webhookObjs, as a Cluster API manager's config/default kustomization does.
func annotateInjectCAFrom(certObjs, webhookObjs []*unstructured.Unstructured) error {
	var from string
	for _, u := range certObjs {
		if u.GetKind() == "Certificate" {
			if from != "" {
				return errors.New("more than one Certificate")
			}
			from = u.GetNamespace() + "/" + u.GetName()
		}
	}
	if from == "" {
		return errors.New("no Certificate")
	}
	for _, u := range webhookObjs {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[certmanager.InjectCAFrom] = from
		u.SetAnnotations(a)
	}
	return nil
}

// copyServingCertificates watches each issued Secret and copies its tls.crt, tls.key and
// ca.crt into the certificate's folder (certs.WriteAtomic, the way the kubelet updates a
// Secret volume), on its first issue and on every renewal, until Stop.
func (s *Sandbox) copyServingCertificates() error {
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return fmt.Errorf("client for the serving certificates: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCopies = cancel
	for _, sc := range s.serving {
		lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", sc.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", sc.SecretName).String()
		})
		inf := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
		copyFrom := func(obj any) {
			if secret, ok := obj.(*corev1.Secret); ok {
				s.copyServingCertificate(sc, secret)
			}
		}
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    copyFrom,
			UpdateFunc: func(_, obj any) { copyFrom(obj) },
		})
		if err != nil {
			return fmt.Errorf("watch secret %s/%s: %w", sc.Namespace, sc.SecretName, err)
		}
		s.copies.Go(func() { inf.RunWithContext(ctx) })
	}
	return nil
}

// copyServingCertificate writes one issue of a Secret into its folder, unless it was written.
func (s *Sandbox) copyServingCertificate(sc *ServingCertificate, secret *corev1.Secret) {
	crt, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if bytes.Equal(crt, sc.lastCert) {
		return
	}
	log := s.opts.Log.WithValues("secret", sc.Namespace+"/"+sc.SecretName, "dir", sc.Dir)
	err := certs.WriteAtomic(sc.Dir, map[string][]byte{
		corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": secret.Data["ca.crt"],
	})
	if err != nil {
		log.Error(err, "copy the issued serving certificate")
		return
	}
	first := sc.lastCert == nil
	sc.lastCert = bytes.Clone(crt)
	if first {
		close(sc.copied)
	}
	log.V(1).Info("copied the issued serving certificate", "first", first)
}

// waitServingCertificates waits until cert-manager issued every serving certificate, the
// sandbox copied it into its folder, and cert-manager's cainjector filled the caBundle of every
// webhook of its configurations with the Secret's CA.
func (s *Sandbox) waitServingCertificates(ctx context.Context) error {
	var missing string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, certificateTimeout, true, func(ctx context.Context) (bool, error) {
		for _, sc := range s.serving {
			why, err := s.servingCertificateMissing(ctx, sc)
			if err != nil {
				return false, err
			}
			if why != "" {
				missing = why
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for cert-manager's serving certificates (%s): %w", missing, err)
	}
	return nil
}

// servingCertificateMissing says what is still missing of one serving certificate ("" when
// nothing is).
func (s *Sandbox) servingCertificateMissing(ctx context.Context, sc *ServingCertificate) (string, error) {
	select {
	case <-sc.copied:
	default:
		return fmt.Sprintf("secret %s/%s not issued or not copied yet", sc.Namespace, sc.SecretName), nil
	}
	var secret corev1.Secret
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: sc.SecretName}, &secret); err != nil {
		return "", fmt.Errorf("read secret %s/%s: %w", sc.Namespace, sc.SecretName, err)
	}
	ca := secret.Data["ca.crt"]
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: sc.Validating}, v); err != nil {
		return "", fmt.Errorf("read %s: %w", sc.Validating, err)
	}
	for _, w := range v.Webhooks {
		if len(ca) == 0 || !bytes.Equal(w.ClientConfig.CABundle, ca) {
			return fmt.Sprintf("caBundle of %s not injected yet", sc.Validating), nil
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: sc.Mutating}, m); err != nil {
		return "", fmt.Errorf("read %s: %w", sc.Mutating, err)
	}
	for _, w := range m.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			return fmt.Sprintf("caBundle of %s not injected yet", sc.Mutating), nil
		}
	}
	return "", nil
}
