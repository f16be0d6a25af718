package deploy_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/certs"
	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
)

// The serving Certificate config/default renders, and the Secret cert-manager writes for it.
const (
	servingCertificate = "captf-serving-cert"
	servingSecret      = "captf-webhook-server-cert"
)

// startCertManager runs cert-manager's own controllers (the version go.mod pins) against the
// suite's control plane, logging into dir; the returned function stops them.
func startCertManager(dir string) func() {
	GinkgoHelper()
	kubeconfig := filepath.Join(dir, "cert-manager.kubeconfig")
	Expect(certmanager.WriteKubeconfig(cfg, kubeconfig)).To(Succeed())
	bin, err := certmanager.Binary()
	Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(dir, "cert-manager.log")
	out, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	p, err := certmanager.Start(certmanager.Options{Binary: bin, Kubeconfig: kubeconfig, Out: out})
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "cert-manager-controllers (pid %d) logs to %s\n", p.Pid(), logPath)
	return func() {
		defer out.Close()
		Expect(p.Stop(ctx, 15*time.Second)).To(Succeed())
	}
}

// forLoopback is the test's one change to the release's serving Certificate: the webhook
// server runs in this process, reached on 127.0.0.1, so the certificate is also for that
// address (the Service names stay). The other objects are returned as they are.
func forLoopback(objs objects) objects {
	GinkgoHelper()
	out := make(objects, 0, len(objs))
	found := false
	for _, u := range objs {
		u = u.DeepCopy()
		if u.GetKind() == "Certificate" && u.GetNamespace() == systemNS && u.GetName() == servingCertificate {
			Expect(unstructured.SetNestedStringSlice(u.Object, []string{"127.0.0.1"}, "spec", "ipAddresses")).To(Succeed())
			found = true
		}
		out = append(out, u)
	}
	Expect(found).To(BeTrue(), "no Certificate %s/%s in the release", systemNS, servingCertificate)
	return out
}

// issued waits until cert-manager wrote a serving certificate for 127.0.0.1 other than the one
// with serial previous (nil: any) and returns its Secret and serial.
func issued(previous *big.Int) (*corev1.Secret, *big.Int) {
	GinkgoHelper()
	var secret corev1.Secret
	var serial *big.Int
	Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: servingSecret}, &secret)).To(Succeed())
		block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		g.Expect(block).NotTo(BeNil(), "no certificate in %s yet", servingSecret)
		c, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(slices.ContainsFunc(c.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) })).To(BeTrue(),
			"the issued certificate is not for 127.0.0.1 yet")
		g.Expect(secret.Data["ca.crt"]).NotTo(BeEmpty())
		g.Expect(secret.Data[corev1.TLSPrivateKeyKey]).NotTo(BeEmpty())
		if previous != nil {
			g.Expect(c.SerialNumber).NotTo(Equal(previous), "not re-issued yet")
		}
		serial = c.SerialNumber
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return &secret, serial
}

// copyIssued writes the Secret's tls.crt, tls.key and ca.crt into the manager's certificate
// folder, as the kubelet updates the Deployment's Secret volume, and returns its CA.
func copyIssued(certDir string, secret *corev1.Secret) []byte {
	GinkgoHelper()
	Expect(certs.WriteAtomic(certDir, map[string][]byte{
		corev1.TLSCertKey:       secret.Data[corev1.TLSCertKey],
		corev1.TLSPrivateKeyKey: secret.Data[corev1.TLSPrivateKeyKey],
		"ca.crt":                secret.Data["ca.crt"],
	})).To(Succeed())
	return secret.Data["ca.crt"]
}

// waitCAInjected waits until cert-manager's cainjector put ca into every webhook of the
// installed configurations.
func waitCAInjected(ca []byte) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var vs admissionregistrationv1.ValidatingWebhookConfigurationList
		g.Expect(admin.List(ctx, &vs, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		g.Expect(vs.Items).NotTo(BeEmpty())
		for _, v := range vs.Items {
			for _, w := range v.Webhooks {
				g.Expect(bytes.Equal(w.ClientConfig.CABundle, ca)).To(BeTrue(), "caBundle of %s/%s not injected", v.Name, w.Name)
			}
		}
		var ms admissionregistrationv1.MutatingWebhookConfigurationList
		g.Expect(admin.List(ctx, &ms, client.MatchingLabels{providerLabel: providerLabelValue})).To(Succeed())
		g.Expect(ms.Items).NotTo(BeEmpty())
		for _, m := range ms.Items {
			for _, w := range m.Webhooks {
				g.Expect(bytes.Equal(w.ClientConfig.CABundle, ca)).To(BeTrue(), "caBundle of %s/%s not injected", m.Name, w.Name)
			}
		}
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// reissue changes the serving Certificate's spec (one more DNS name), which makes cert-manager
// issue it again, as a renewal does.
func reissue(dnsName string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cert unstructured.Unstructured
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		if err := admin.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: servingCertificate}, &cert); err != nil {
			return err
		}
		names, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(cert.Object, append(names, dnsName), "spec", "dnsNames"); err != nil {
			return err
		}
		return admin.Update(ctx, &cert)
	})).To(Succeed())
}
