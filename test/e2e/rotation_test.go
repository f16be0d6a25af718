package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	testobjects "github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// admissionLoad sends admission requests to CAPTF's webhooks in a loop and sorts every answer:
// a dry-run create of a TerraformCluster with a short deadline, which the defaulting webhook
// must answer (a lock timeout below the deadline) and validation allows, both with failurePolicy
// Fail; and a dry-run removal of a TerraformCluster's finalizer while its Job runs, which the
// guard (failurePolicy Fail) must deny. A request no webhook answered (failed calling webhook:
// TLS, connection, timeout) or answered wrongly is failed; a removal the guard let through is
// unguarded. Nothing is written.
type admissionLoad struct {
	allowed, denied, failed, unguarded atomic.Int64
	firstFailure                       atomic.Value
	stop                               chan struct{}
	stopOnce                           sync.Once
	wg                                 sync.WaitGroup
}

// startAdmissionLoad starts two clients: one creates TerraformClusters in ns, one removes the
// finalizer of TerraformCluster ns/name.
func startAdmissionLoad(c client.Client, ns, name string) *admissionLoad {
	l := &admissionLoad{stop: make(chan struct{})}
	removeFinalizer := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	DeferCleanup(l.halt)
	l.wg.Add(2)
	go func() {
		defer GinkgoRecover()
		defer l.wg.Done()
		for i := 0; l.running(); i++ {
			obj := testobjects.Cluster(ns, fmt.Sprintf("load-%d", i)).Spec(func(s *infrav1.TerraformSpec) {
				s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: name + "-cluster-module"}}
				s.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
			}).Obj()
			l.defaultedCall(obj, c.Create(ctx, obj, client.DryRunAll))
		}
	}()
	go func() {
		defer GinkgoRecover()
		defer l.wg.Done()
		for l.running() {
			l.guardedCall(c.Patch(ctx, tc(ns, name), removeFinalizer, client.DryRunAll))
		}
	}()
	return l
}

// halt stops the clients (once) and waits for them.
func (l *admissionLoad) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *admissionLoad) running() bool {
	select {
	case <-l.stop:
		return false
	default:
		return true
	}
}

// defaultedCall counts a create the webhooks must default and allow.
func (l *admissionLoad) defaultedCall(obj *infrav1.TerraformCluster, err error) {
	switch {
	case err != nil:
		l.failure(err)
	case ptr.Deref(obj.Spec.Job.LockTimeoutSeconds, 0) != 60:
		l.failure(fmt.Errorf("the create was not defaulted: lock timeout %v", obj.Spec.Job.LockTimeoutSeconds))
	default:
		l.allowed.Add(1)
	}
}

// guardedCall counts a request the guard must deny.
func (l *admissionLoad) guardedCall(err error) {
	switch {
	case err == nil:
		l.unguarded.Add(1)
	case strings.Contains(err.Error(), `admission webhook "guard.captf.io" denied the request`):
		l.denied.Add(1)
	default:
		l.failure(err)
	}
}

func (l *admissionLoad) failure(err error) {
	l.failed.Add(1)
	l.firstFailure.CompareAndSwap(nil, err.Error())
}

// total is the number of answered and failed requests so far.
func (l *admissionLoad) total() int64 {
	return l.allowed.Load() + l.denied.Load() + l.failed.Load() + l.unguarded.Load()
}

// waitFlowing waits until both clients had at least n more answers than at before.
func (l *admissionLoad) waitFlowing(n int64) {
	GinkgoHelper()
	allowed, denied := l.allowed.Load(), l.denied.Load()
	Eventually(func(g Gomega) {
		g.Expect(l.failed.Load()).To(BeZero(), "first failure: %v", l.firstFailure.Load())
		g.Expect(l.allowed.Load()).To(BeNumerically(">=", allowed+n))
		g.Expect(l.denied.Load()).To(BeNumerically(">=", denied+n))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// finish stops the clients and checks every request got its answer: none failed, none unguarded.
func (l *admissionLoad) finish(what string) string {
	GinkgoHelper()
	l.halt()
	figures := fmt.Sprintf("%d admission calls (%d creates defaulted and allowed, %d removals denied by the guard), %d failed, %d unguarded",
		l.total(), l.allowed.Load(), l.denied.Load(), l.failed.Load(), l.unguarded.Load())
	fmt.Fprintf(GinkgoWriter, "%s: %s\n", what, figures)
	AddReportEntry(what, figures)
	Expect(l.failed.Load()).To(BeZero(), "admission calls failed %s; first: %v", what, l.firstFailure.Load())
	Expect(l.unguarded.Load()).To(BeZero(), "the guard allowed removing the finalizer %s", what)
	Expect(l.allowed.Load()).To(BeNumerically(">", 0))
	Expect(l.denied.Load()).To(BeNumerically(">", 0))
	return figures
}

// issuedSecret is the serving certificate's Secret as cert-manager last wrote it.
func issuedSecret(g Gomega, sb *sandbox.Sandbox, sc *sandbox.ServingCertificate) *corev1.Secret {
	var secret corev1.Secret
	g.Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: sc.SecretName}, &secret)).To(Succeed())
	g.Expect(secret.Data[corev1.TLSCertKey]).NotTo(BeEmpty())
	return &secret
}

// changeDNSNames makes cert-manager issue the serving Certificate again by changing its spec:
// edit gets the DNS names and returns the new ones.
func changeDNSNames(sb *sandbox.Sandbox, sc *sandbox.ServingCertificate, edit func([]string) []string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cert := &unstructured.Unstructured{}
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		if err := sb.Client().Get(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: sc.Name}, cert); err != nil {
			return err
		}
		names, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(cert.Object, edit(names), "spec", "dnsNames"); err != nil {
			return err
		}
		return sb.Client().Update(ctx, cert)
	})).To(Succeed())
}

func withDNSName(name string) func([]string) []string {
	return func(names []string) []string { return append(names, name) }
}

func withoutDNSName(name string) func([]string) []string {
	return func(names []string) []string {
		var out []string
		for _, n := range names {
			if n != name {
				out = append(out, n)
			}
		}
		return out
	}
}

// reissuedAndServed waits until cert-manager issued a certificate other than before for
// dnsName (or without it, when absent), the manager serves it without a restart, and the
// cainjector put its CA into every caBundle of every serving certificate's configurations. It
// returns how long the manager took to serve it after cert-manager wrote it.
func reissuedAndServed(sb *sandbox.Sandbox, sc *sandbox.ServingCertificate, before []byte, dnsName string, absent bool) time.Duration {
	GinkgoHelper()
	var secret *corev1.Secret
	Eventually(func(g Gomega) {
		secret = issuedSecret(g, sb, sc)
		g.Expect(secret.Data[corev1.TLSCertKey]).NotTo(Equal(before), "not issued again yet")
		names := parsePEMCertificate(secret.Data[corev1.TLSCertKey]).DNSNames
		if absent {
			g.Expect(names).NotTo(ContainElement(dnsName))
		} else {
			g.Expect(names).To(ContainElement(dnsName))
		}
	}).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(Succeed())
	seen := time.Now()
	issued := parsePEMCertificate(secret.Data[corev1.TLSCertKey])
	Eventually(func(g Gomega) {
		served := servedBy(g, sb, secret.Data["ca.crt"])
		g.Expect(served.SerialNumber).To(Equal(issued.SerialNumber), "the manager still serves serial %s", served.SerialNumber)
	}).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	took := time.Since(seen)
	eventuallyCABundlesInjected(sb)
	return took
}

// servedBy is the certificate CAPTF's manager of sb serves on its webhook port, verified
// against caPEM for 127.0.0.1.
func servedBy(g Gomega, sb *sandbox.Sandbox, caPEM []byte) *x509.Certificate {
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		net.JoinHostPort("127.0.0.1", strconv.Itoa(sb.WebhookPort)), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	g.Expect(peer).NotTo(BeEmpty())
	return peer[0]
}

// bundleHolds says whether every certificate of ca is in bundle. cert-manager's cainjector
// merges: a caBundle keeps the CAs it held until they expire, and gains the new one.
func bundleHolds(bundle, ca []byte) bool {
	held := map[string]bool{}
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		held[string(b.Bytes)] = true
	}
	found := false
	for rest := ca; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if !held[string(b.Bytes)] {
			return false
		}
		found = true
	}
	return found
}

// eventuallyCABundlesInjected waits until every webhook of every serving certificate's
// configurations holds the CA of that certificate's Secret.
func eventuallyCABundlesInjected(sb *sandbox.Sandbox) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for _, sc := range sb.ServingCertificates() {
			ca := issuedSecret(g, sb, sc).Data["ca.crt"]
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			g.Expect(sb.Client().Get(ctx, client.ObjectKey{Name: sc.Validating}, &v)).To(Succeed())
			for _, w := range v.Webhooks {
				g.Expect(bundleHolds(w.ClientConfig.CABundle, ca)).To(BeTrue(), "caBundle of %s", w.Name)
			}
			var m admissionregistrationv1.MutatingWebhookConfiguration
			g.Expect(sb.Client().Get(ctx, client.ObjectKey{Name: sc.Mutating}, &m)).To(Succeed())
			for _, w := range m.Webhooks {
				g.Expect(bundleHolds(w.ClientConfig.CABundle, ca)).To(BeTrue(), "caBundle of %s", w.Name)
			}
		}
	}).WithTimeout(time.Minute).Should(Succeed())
}

// stillRunning checks the Job the guard protects has not ended, so every removal the load sent
// was one the guard had to deny.
func stillRunning(sb *sandbox.Sandbox, job *batchv1.Job) {
	GinkgoHelper()
	var j batchv1.Job
	Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(job), &j)).To(Succeed())
	Expect(j.Status.CompletionTime).To(BeNil(), "Job %s ended during the load", j.Name)
	Expect(j.Status.Failed).To(BeZero(), "Job %s failed during the load", j.Name)
}

var _ = Describe("CAPTF's webhook serving certificate under admission load", Ordered, func() {
	const ns, name = "rotation", "rotated"
	var (
		sc  *sandbox.ServingCertificate
		job *batchv1.Job
	)

	BeforeAll(func() {
		sc = shared.ServingCertificates()[0]
		Expect(sc.Validating).To(Equal(sandbox.ValidatingWebhookConfiguration))
		createNamespace(shared, ns)
		// A Job that outlives both specs: while it runs the guard must deny the removal.
		applyFixture(shared, ns, "cluster.yaml", name, 900)
		job = eventuallyRunning(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
	})

	It("is issued again by cert-manager and served without a restart while every admission call gets its answer", func() {
		load := startAdmissionLoad(shared.Client(), ns, name)
		load.waitFlowing(20)
		for _, step := range []struct {
			what   string
			edit   func([]string) []string
			absent bool
		}{
			{"a DNS name added", withDNSName("rotation.captf.test"), false},
			{"the DNS name removed", withoutDNSName("rotation.captf.test"), true},
		} {
			By("cert-manager issues the certificate again: " + step.what)
			var before []byte
			Eventually(func(g Gomega) { before = issuedSecret(g, shared, sc).Data[corev1.TLSCertKey] }).Should(Succeed())
			asked := time.Now()
			changeDNSNames(shared, sc, step.edit)
			took := reissuedAndServed(shared, sc, before, "rotation.captf.test", step.absent)
			AddReportEntry("served after cert-manager issued it again ("+step.what+")", took.Round(time.Millisecond).String())
			fmt.Fprintf(GinkgoWriter, "%s: served %v after cert-manager wrote it, %v after the spec changed\n",
				step.what, took.Round(time.Millisecond), time.Since(asked).Round(time.Millisecond))
			load.waitFlowing(20)
		}
		stillRunning(shared, job)
		load.finish("during two re-issues of the serving certificate")
	})

	It("keeps serving the last certificate while cert-manager is stopped for a minute, and serves the renewal once it is back", func() {
		load := startAdmissionLoad(shared.Client(), ns, name)
		load.waitFlowing(20)
		var before []byte
		Eventually(func(g Gomega) { before = issuedSecret(g, shared, sc).Data[corev1.TLSCertKey] }).Should(Succeed())
		servedBefore := parsePEMCertificate(before)

		By("cert-manager stops; a renewal falls due while it is down")
		Expect(shared.StopCertManager(ctx)).To(Succeed())
		DeferCleanup(func() {
			if shared.CertManagerPid() == 0 {
				Expect(shared.StartCertManager()).To(Succeed())
			}
		})
		Expect(shared.CertManagerPid()).To(BeZero())
		changeDNSNames(shared, sc, withDNSName("down.captf.test"))

		By("for a minute, admission calls keep getting answers from the last certificate")
		down, atStop := time.Now(), load.total()
		Consistently(func(g Gomega) {
			g.Expect(load.failed.Load()).To(BeZero(), "first failure: %v", load.firstFailure.Load())
			g.Expect(issuedSecret(g, shared, sc).Data[corev1.TLSCertKey]).To(Equal(before), "issued while cert-manager was stopped")
			g.Expect(servedBy(g, shared, issuedSecret(g, shared, sc).Data["ca.crt"]).SerialNumber).To(Equal(servedBefore.SerialNumber))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		downCalls := fmt.Sprintf("%d admission calls in %v, none failed", load.total()-atStop, time.Since(down).Round(time.Second))
		fmt.Fprintf(GinkgoWriter, "while cert-manager was stopped: %s\n", downCalls)
		AddReportEntry("while cert-manager was stopped", downCalls)

		By("cert-manager starts again and issues the renewal that fell due; the manager serves it")
		restarted := time.Now()
		Expect(shared.StartCertManager()).To(Succeed())
		took := reissuedAndServed(shared, sc, before, "down.captf.test", false)
		fmt.Fprintf(GinkgoWriter, "renewal served %v after cert-manager wrote it, %v after cert-manager started again\n",
			took.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
		AddReportEntry("renewal served after cert-manager started again", time.Since(restarted).Round(time.Millisecond).String())
		load.waitFlowing(20)
		stillRunning(shared, job)
		load.finish("while cert-manager was stopped for a minute and after it started again")

		By("the Certificate as it was")
		Eventually(func(g Gomega) { before = issuedSecret(g, shared, sc).Data[corev1.TLSCertKey] }).Should(Succeed())
		changeDNSNames(shared, sc, withoutDNSName("down.captf.test"))
		reissuedAndServed(shared, sc, before, "down.captf.test", true)
	})
})
