package webhooks_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// mergePatch writes a JSON merge patch to the object (or its /status).
func mergePatch(c client.Client, kind, ns, name string, status bool, body string) error {
	o := u(kind, ns, name)
	p := client.RawPatch(types.MergePatchType, []byte(body))
	if status {
		return c.Status().Patch(ctx, o, p)
	}
	return c.Patch(ctx, o, p)
}

var _ = Describe("A webhook outage", func() {
	It("fails the guarded removals and nothing else: matchConditions keep every other write away from the webhooks", func() {
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		create(kind, ns, "guarded")
		r, err := startRun(ctx, admin, kind, ns, "guarded", 1)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range allMarks {
			Expect(ensureMark(ctx, admin, kind, ns, "guarded", m, r.job.Name)).To(Succeed())
		}
		By("an object without annotations, finalizers or status: the guard's expression must not fail on it")
		create(kind, ns, "bare")
		Expect(mergePatch(admin, kind, ns, "bare", false, `{"metadata":{"finalizers":null}}`)).To(Succeed())
		bare := u(kind, ns, "bare")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(bare), bare)).To(Succeed())
		Expect(bare.GetAnnotations()).To(BeEmpty())
		Expect(bare.GetFinalizers()).To(BeEmpty())
		Expect(bare.Object).NotTo(HaveKey("status"))

		By("stopping the webhook server")
		Expect(hooks.stop()).To(Succeed())
		hooks = nil
		DeferCleanup(restartHooks)

		By("guarded removals fail: failurePolicy Fail")
		for _, m := range allMarks {
			for _, how := range []method{methodMerge, methodJSON, methodUpdate} {
				err := remove(ctx, admin, kind, ns, "guarded", m, how)
				Expect(err).To(HaveOccurred(), "%s by %s must fail while the guard is down", m, how)
				Expect(err.Error()).To(ContainSubstring(`failed calling webhook "guard.captf.io"`))
				Expect(hasMark(ctx, admin, kind, ns, "guarded", m)).To(BeTrue())
			}
		}

		By("every other edit succeeds")
		edits := []struct {
			what   string
			name   string
			status bool
			body   string
		}{
			{"add a label", "guarded", false, `{"metadata":{"labels":{"team":"infra"}}}`},
			{"add an annotation", "guarded", false, `{"metadata":{"annotations":{"note":"on call"}}}`},
			{"change block-move's value (it stays)", "guarded", false, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":"x"}}}`},
			{"remove an unrelated annotation", "guarded", false, `{"metadata":{"annotations":{"note":null}}}`},
			{"add another finalizer", "guarded", false, `{"metadata":{"finalizers":["infrastructure.cluster.x-k8s.io/captf","example.com/hold"]}}`},
			{"remove the other finalizer", "guarded", false, `{"metadata":{"finalizers":["infrastructure.cluster.x-k8s.io/captf"]}}`},
			{"change the spec", "guarded", false, `{"spec":{"module":{"image":"example.com/module:2"}}}`},
			{"write conditions on /status", "guarded", true, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Testing","message":"outage","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`},
			{"change activeJob's operation, same Job (/status)", "guarded", true, `{"status":{"activeJob":{"operation":"Plan"}}}`},
			{"label the bare object", "bare", false, `{"metadata":{"labels":{"team":"infra"}}}`},
			{"annotate the bare object", "bare", false, `{"metadata":{"annotations":{"note":"x"}}}`},
			{"write the bare object's first status", "bare", true, `{"status":{"observedGeneration":1}}`},
			{"set block-move on the bare object", "bare", false, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":""}}}`},
			{"set activeJob on the bare object (/status)", "bare", true, `{"status":{"activeJob":{"name":"captf-x-1","operation":"Apply"}}}`},
			{"change the bare object's spec", "bare", false, `{"spec":{"job":{"activeDeadlineSeconds":7200}}}`},
		}
		fmt.Printf("\nWith the webhook server stopped:\n")
		for _, m := range allMarks {
			fmt.Printf("  %-52s failed: failed calling webhook \"guard.captf.io\"\n", "remove "+string(m))
		}
		for _, e := range edits {
			Expect(mergePatch(admin, kind, ns, e.name, e.status, e.body)).To(Succeed(), e.what)
			fmt.Printf("  %-52s succeeded\n", e.what)
		}
		By("deleting an object is never intercepted")
		Expect(admin.Delete(ctx, u(kind, ns, "bare"))).To(Succeed())
		fmt.Printf("  %-52s succeeded\n", "delete an object")

		By("creating needs the mutating webhook (failurePolicy Fail), so no object is ever without the finalizer")
		err = admin.Create(ctx, newObject(kind, ns, "new"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`failed calling webhook "default.terraformmachine.captf.io"`))
		msg := err.Error()
		if i := strings.Index(msg, `failed calling webhook "default.terraformmachine.captf.io"`); i >= 0 {
			msg = msg[:i+len(`failed calling webhook "default.terraformmachine.captf.io"`)]
		}
		fmt.Printf("  %-52s failed: %s\n\n", "create an object", msg)
	})
})

var _ = Describe("A matchCondition that fails to evaluate", func() {
	It("rejects the request with failurePolicy Fail and skips the webhook with Ignore", func() {
		ns := newNamespace()
		Expect(mergePatchNamespace(ns, `{"metadata":{"labels":{"captf.io/cel-probe":"`+ns+`"}}}`)).To(Succeed())
		kind := infrav1.TerraformClusterKind
		create(kind, ns, "probe")
		Expect(mergePatch(admin, kind, ns, "probe", false, `{"metadata":{"annotations":{"present":"yes"}}}`)).To(Succeed())

		// The expression indexes a key the object does not have: CEL reports "no such key". The
		// webhook's URL is a port nobody serves, so a call could only fail.
		probe := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "captf-cel-probe"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "cel-probe.captf.io",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never"), CABundle: env.WebhookInstallOptions.LocalServingCAData},
				Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{infrav1.GroupVersion.Group}, APIVersions: []string{"v1alpha1"}, Resources: []string{"terraformclusters"}}}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"captf.io/cel-probe": ns}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds:          ptr.To[int32](2),
				MatchConditions: []admissionregistrationv1.MatchCondition{{
					Name: "indexes-a-missing-key", Expression: `object.metadata.annotations['captf.io/absent'] == 'x'`}},
			}},
		}
		Expect(admin.Create(ctx, probe)).To(Succeed())
		DeferCleanup(func() { Expect(admin.Delete(ctx, probe)).To(Succeed()) })

		edit := func(i int) error {
			return mergePatch(admin, kind, ns, "probe", false, fmt.Sprintf(`{"metadata":{"labels":{"edit":"e%d"}}}`, i))
		}
		var failed error
		i := 0
		Eventually(func() error { i++; failed = edit(i); return failed }).Should(HaveOccurred(), "Fail: the evaluation error rejects the request")
		Expect(failed.Error()).To(ContainSubstring("resulted in error: no such key: captf.io/absent"))
		Expect(failed.Error()).NotTo(ContainSubstring("127.0.0.1:1"), "the API server never called the webhook: the condition failed first")
		fmt.Printf("\nmatchCondition error, failurePolicy Fail: %v\n", failed)

		Expect(admin.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
		probe.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		Expect(admin.Update(ctx, probe)).To(Succeed())
		Eventually(func() error { i++; return edit(i) }).Should(Succeed(), "Ignore: the evaluation error skips the webhook")
		fmt.Printf("matchCondition error, failurePolicy Ignore: the request passed without calling the webhook\n\n")
	})
})

func mergePatchNamespace(ns, body string) error {
	return admin.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(body)))
}
