package certmanager_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"testing"
	"time"

	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestANewCAReachesTheCABundle rotates the CA: its Secret deleted, cert-manager issues a new CA;
// the serving Secret deleted, cert-manager issues a serving certificate from the new CA; the
// cainjector then adds the new CA to every injectable's caBundle and keeps the old one (it
// merges, dropping a CA only once it expired), so certificates of either CA verify.
func TestANewCAReachesTheCABundle(t *testing.T) {
	g := NewWithT(t)
	c, _ := start(t)
	ctx := context.Background()
	ns := namespace(t, c, "rotate")
	createChain(t, c, ns, "webhook-service."+ns+".svc")
	injectables := createInjectables(t, c, ns)

	secret := func(g Gomega, name string) *corev1.Secret {
		var s corev1.Secret
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		g.Expect(s.Data[corev1.TLSCertKey]).NotTo(BeEmpty())
		return &s
	}
	injected := func(cas ...[]byte) {
		t.Helper()
		for _, obj := range injectables {
			g.Eventually(func(g Gomega) {
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				bundles := caBundles(obj)
				g.Expect(bundles).NotTo(BeEmpty())
				for _, b := range bundles {
					g.Expect(pemBlocks(b)).To(ConsistOf(pemBlocks(bytes.Join(cas, nil))))
				}
			}).WithTimeout(issueTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "caBundle of %T %s", obj, obj.GetName())
		}
	}
	var first *corev1.Secret
	g.Eventually(func(g Gomega) { first = secret(g, "serving-cert") }).WithTimeout(issueTimeout).Should(Succeed())
	injected(first.Data[cmmeta.TLSCAKey])

	oldCA := secret(g, "ca-cert")
	g.Expect(c.Delete(ctx, oldCA)).To(Succeed())
	var newCA *corev1.Secret
	g.Eventually(func(g Gomega) {
		newCA = secret(g, "ca-cert")
		g.Expect(newCA.Data[corev1.TLSCertKey]).NotTo(Equal(oldCA.Data[corev1.TLSCertKey]))
	}).WithTimeout(issueTimeout).Should(Succeed())

	g.Expect(c.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := secret(g, "serving-cert")
		g.Expect(s.Data[cmmeta.TLSCAKey]).To(Equal(newCA.Data[corev1.TLSCertKey]))
	}).WithTimeout(issueTimeout).Should(Succeed())
	injected(oldCA.Data[corev1.TLSCertKey], newCA.Data[corev1.TLSCertKey])
}

// pemBlocks are the DER bytes of each PEM block of data.
func pemBlocks(data []byte) []string {
	var out []string
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		out = append(out, string(b.Bytes))
	}
}
