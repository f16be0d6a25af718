package e2e_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/certmanager"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// webhookCA is the CA Certificate of config/certmanager as config/default names it, and its
// Secret.
const webhookCA = "captf-webhook-ca"

// injectCAFrom points cert-manager's cainjector of CAPTF's two webhook configurations at the
// Certificate ns/name.
func injectCAFrom(sb *sandbox.Sandbox, sc *sandbox.ServingCertificate, ns, name string) {
	GinkgoHelper()
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{},
	} {
		cfgName := sc.Validating
		if _, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			cfgName = sc.Mutating
		}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := sb.Client().Get(ctx, client.ObjectKey{Name: cfgName}, obj); err != nil {
				return err
			}
			a := obj.GetAnnotations()
			a[certmanager.InjectCAFrom] = ns + "/" + name
			obj.SetAnnotations(a)
			return sb.Client().Update(ctx, obj)
		})).To(Succeed())
	}
}

// eventuallyBundlesHold waits until every webhook of CAPTF's configurations holds each CA.
func eventuallyBundlesHold(sb *sandbox.Sandbox, sc *sandbox.ServingCertificate, cas ...[]byte) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		g.Expect(sb.Client().Get(ctx, client.ObjectKey{Name: sc.Validating}, &v)).To(Succeed())
		var m admissionregistrationv1.MutatingWebhookConfiguration
		g.Expect(sb.Client().Get(ctx, client.ObjectKey{Name: sc.Mutating}, &m)).To(Succeed())
		var bundles [][]byte
		for _, w := range v.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, w := range m.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, b := range bundles {
			for _, ca := range cas {
				g.Expect(bundleHolds(b, ca)).To(BeTrue())
			}
		}
	}).WithTimeout(time.Minute).Should(Succeed())
}

var _ = Describe("CAPTF's webhook CA rotated under admission load", Ordered, func() {
	const ns, name = "rotation-ca", "rotated"
	var (
		sb  *sandbox.Sandbox
		sc  *sandbox.ServingCertificate
		job *batchv1.Job
	)

	BeforeAll(func() {
		// A sandbox of its own: the old CA stays in the caBundles after the rotation (the
		// cainjector merges), which the shared sandbox's other specs do not expect.
		sb = startSandbox("ca-rotation")
		DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
		sc = sb.ServingCertificates()[0]
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 900)
		job = eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
	})

	It("is trusted before any certificate it signs is served: cainjector takes the CA from the CA Certificate, then the serving certificate is issued again", func() {
		load := startAdmissionLoad(sb.Client(), ns, name)
		load.waitFlowing(20)
		caKey := client.ObjectKey{Namespace: sc.Namespace, Name: webhookCA}
		var caSecret corev1.Secret
		Expect(sb.Client().Get(ctx, caKey, &caSecret)).To(Succeed())
		oldCA := caSecret.Data[corev1.TLSCertKey]
		var before []byte
		Eventually(func(g Gomega) { before = issuedSecret(g, sb, sc).Data[corev1.TLSCertKey] }).Should(Succeed())

		By("the cainjector takes the CA from the CA Certificate for the rotation")
		injectCAFrom(sb, sc, sc.Namespace, webhookCA)

		By("the CA Secret deleted: cert-manager issues a new CA, which the caBundles gain beside the old one")
		Expect(sb.Client().Delete(ctx, &caSecret)).To(Succeed())
		var newCA []byte
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(sb.Client().Get(ctx, caKey, &s)).To(Succeed())
			g.Expect(s.Data[corev1.TLSCertKey]).NotTo(BeEmpty())
			g.Expect(s.Data[corev1.TLSCertKey]).NotTo(Equal(oldCA))
			newCA = s.Data[corev1.TLSCertKey]
		}).WithTimeout(time.Minute).Should(Succeed())
		eventuallyBundlesHold(sb, sc, oldCA, newCA)

		By("the serving certificate issued again, from the new CA, and served")
		asked := time.Now()
		changeDNSNames(sb, sc, withDNSName("ca-rotation.captf.test"))
		took := reissuedAndServed(sb, sc, before, "ca-rotation.captf.test", false)
		fmt.Fprintf(GinkgoWriter, "served %v after cert-manager wrote it, %v after the spec changed\n",
			took.Round(time.Millisecond), time.Since(asked).Round(time.Millisecond))
		Expect(parsePEMCertificate(issuedSecret(Default, sb, sc).Data["ca.crt"]).Equal(parsePEMCertificate(newCA))).To(BeTrue(), "issued from the new CA")

		By("the cainjector takes the CA from the serving certificate again")
		injectCAFrom(sb, sc, sc.Namespace, sc.Name)
		eventuallyBundlesHold(sb, sc, oldCA, newCA)
		eventuallyCABundlesInjected(sb)
		load.waitFlowing(20)
		stillRunning(sb, job)
		load.finish("during the CA's rotation")
	})
})
