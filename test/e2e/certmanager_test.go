package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

var _ = Describe("the sandbox's webhook serving certificates", func() {
	It("are issued by cert-manager: each Certificate is Ready, cert-manager's cainjector filled every caBundle with the CA of the issued Secret, and CAPTF's manager serves the issued certificate, and the one issued again", func() {
		serving := shared.ServingCertificates()
		Expect(serving).To(HaveLen(4), "CAPTF's and the three Cluster API managers'")
		Expect(serving[0].Validating).To(Equal(sandbox.ValidatingWebhookConfiguration))

		for _, sc := range serving {
			By(fmt.Sprintf("Certificate %s/%s and the configurations %s, %s", sc.Namespace, sc.Name, sc.Validating, sc.Mutating))
			cert := &unstructured.Unstructured{}
			cert.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
			Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: sc.Name}, cert)).To(Succeed())
			Expect(certificateReady(cert)).To(Equal("True"), "Certificate %s/%s Ready", sc.Namespace, sc.Name)

			var secret corev1.Secret
			Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: sc.SecretName}, &secret)).To(Succeed())
			ca := secret.Data["ca.crt"]
			Expect(ca).NotTo(BeEmpty())
			leaf := parsePEMCertificate(secret.Data[corev1.TLSCertKey])
			Expect(slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) })).
				To(BeTrue(), "issued for 127.0.0.1, where the webhooks are served: %v", leaf.IPAddresses)
			Expect(leaf.DNSNames).To(ContainElement("localhost"))

			var v admissionregistrationv1.ValidatingWebhookConfiguration
			Expect(shared.Client().Get(ctx, client.ObjectKey{Name: sc.Validating}, &v)).To(Succeed())
			Expect(v.Annotations).To(HaveKeyWithValue(certmanager.InjectCAFrom, sc.Namespace+"/"+sc.Name))
			Expect(v.Webhooks).NotTo(BeEmpty())
			for _, w := range v.Webhooks {
				Expect(w.ClientConfig.CABundle).To(Equal(ca), "caBundle of webhook %s is the issued Secret's CA", w.Name)
			}
			var m admissionregistrationv1.MutatingWebhookConfiguration
			Expect(shared.Client().Get(ctx, client.ObjectKey{Name: sc.Mutating}, &m)).To(Succeed())
			Expect(m.Annotations).To(HaveKeyWithValue(certmanager.InjectCAFrom, sc.Namespace+"/"+sc.Name))
			for _, w := range m.Webhooks {
				Expect(w.ClientConfig.CABundle).To(Equal(ca), "caBundle of webhook %s is the issued Secret's CA", w.Name)
			}
		}

		By("CAPTF's manager serves the certificate cert-manager issued, which verifies against the injected caBundle")
		captf := serving[0]
		key := client.ObjectKey{Namespace: captf.Namespace, Name: captf.SecretName}
		var secret corev1.Secret
		Expect(shared.Client().Get(ctx, key, &secret)).To(Succeed())
		issued := parsePEMCertificate(secret.Data[corev1.TLSCertKey])
		Eventually(func(g Gomega) {
			g.Expect(servedCertificate(g, secret.Data["ca.crt"]).Equal(issued)).To(BeTrue(), "the served certificate is the issued one")
		}).Should(Succeed())

		By("a certificate cert-manager issues again reaches the manager, under the same CA")
		Expect(shared.Client().Delete(ctx, &secret)).To(Succeed())
		var reissued corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(shared.Client().Get(ctx, key, &reissued)).To(Succeed())
			g.Expect(reissued.Data[corev1.TLSCertKey]).NotTo(BeEmpty())
			g.Expect(reissued.Data[corev1.TLSCertKey]).NotTo(Equal(secret.Data[corev1.TLSCertKey]))
		}).Should(Succeed())
		Expect(reissued.Data["ca.crt"]).To(Equal(secret.Data["ca.crt"]), "the CA, and so the caBundle, stays")
		renewed := parsePEMCertificate(reissued.Data[corev1.TLSCertKey])
		Eventually(func(g Gomega) {
			g.Expect(servedCertificate(g, reissued.Data["ca.crt"]).Equal(renewed)).To(BeTrue(), "the manager serves the certificate issued again")
		}).Should(Succeed())
	})
})

// servedCertificate is the certificate CAPTF's manager serves on the sandbox's webhook port,
// verified against caPEM for 127.0.0.1.
func servedCertificate(g Gomega, caPEM []byte) *x509.Certificate {
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		net.JoinHostPort("127.0.0.1", strconv.Itoa(shared.WebhookPort)), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	g.Expect(peer).NotTo(BeEmpty())
	return peer[0]
}

// certificateReady is the status of a cert-manager Certificate's Ready condition ("" without one).
func certificateReady(cert *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// parsePEMCertificate parses the first certificate of a PEM bundle.
func parsePEMCertificate(data []byte) *x509.Certificate {
	block, _ := pem.Decode(data)
	Expect(block).NotTo(BeNil(), "no PEM block")
	cert, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return cert
}
