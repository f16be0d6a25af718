package webhooks_test

import (
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

var _ = Describe("The generated webhook configuration", func() {
	It("says what the design says, is installed unchanged, and every path it calls is served", func() {
		var paths []string
		for _, c := range config.Mutating {
			for _, w := range c.Webhooks {
				Expect(*w.SideEffects).To(Equal(admissionregistrationv1.SideEffectClassNone), w.Name)
				Expect(*w.TimeoutSeconds).To(BeNumerically("<=", 5), w.Name)
				Expect(*w.FailurePolicy).To(Equal(admissionregistrationv1.Fail), "%s: no object is ever created without the finalizer", w.Name)
				Expect(*w.ReinvocationPolicy).To(Equal(admissionregistrationv1.IfNeededReinvocationPolicy), w.Name)
				Expect(w.Rules).To(HaveLen(1))
				Expect(w.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Create), w.Name)
				paths = append(paths, *w.ClientConfig.Service.Path)
			}
		}
		for _, c := range config.Validating {
			for _, w := range c.Webhooks {
				Expect(*w.SideEffects).To(Equal(admissionregistrationv1.SideEffectClassNone), w.Name)
				Expect(*w.TimeoutSeconds).To(BeNumerically("<=", 5), w.Name)
				Expect(w.Rules).To(HaveLen(1))
				switch {
				case strings.HasPrefix(w.Name, "validate-update."):
					Expect(*w.FailurePolicy).To(Equal(admissionregistrationv1.Ignore), w.Name)
					Expect(w.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update), w.Name)
					Expect(w.MatchConditions).To(HaveLen(1), w.Name)
				case strings.HasPrefix(w.Name, "validate."):
					Expect(*w.FailurePolicy).To(Equal(admissionregistrationv1.Fail), w.Name)
					Expect(w.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Create), w.Name)
				}
				paths = append(paths, *w.ClientConfig.Service.Path)
			}
		}
		guard := config.validating("guard.captf.io")
		Expect(guard).NotTo(BeNil())
		Expect(*guard.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		Expect(*guard.ClientConfig.Service.Path).To(Equal(webhooks.GuardPath))
		Expect(guard.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update))
		Expect(guard.Rules[0].Resources).To(ConsistOf("terraformclusters", "terraformclusters/status",
			"terraformmachines", "terraformmachines/status", "terraformmachinepools", "terraformmachinepools/status"))
		Expect(guard.NamespaceSelector).To(BeNil(), "no namespace is exempt from the guard")
		Expect(guard.MatchConditions).To(HaveLen(1))
		lease := config.validating("lease-guard.captf.io")
		Expect(lease).NotTo(BeNil())
		Expect(*lease.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		Expect(*lease.ClientConfig.Service.Path).To(Equal(webhooks.LeaseGuardPath))
		Expect(lease.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update, admissionregistrationv1.Delete))
		Expect(lease.Rules[0].Resources).To(ConsistOf("leases"))
		Expect(lease.NamespaceSelector).To(BeNil(), "no namespace is exempt from the lease guard")
		Expect(lease.ObjectSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
			Key: "captf.io/lease", Operator: metav1.LabelSelectorOpIn, Values: []string{"run", "cluster"}}))
		job := config.validating("job-guard.captf.io")
		Expect(job).NotTo(BeNil())
		Expect(*job.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		Expect(*job.ClientConfig.Service.Path).To(Equal(webhooks.JobGuardPath))
		Expect(job.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update))
		Expect(job.Rules[0].APIGroups).To(ConsistOf("batch"))
		Expect(job.Rules[0].Resources).To(ConsistOf("jobs"))
		Expect(job.NamespaceSelector).To(BeNil(), "no namespace is exempt from the job guard")
		Expect(job.ObjectSelector.MatchLabels).To(Equal(map[string]string{"captf.io/managed": "true"}))
		Expect(job.MatchConditions).To(HaveLen(1))
		for _, l := range webhooks.JobLabels {
			Expect(job.MatchConditions[0].Expression).To(ContainSubstring("'"+l+"'"), "the job guard is not called for changes of %s", l)
		}
		Expect(job.MatchConditions[0].Expression).To(ContainSubstring("ownerReferences"))

		By("the API server holds exactly the rendered configurations (envtest only rewrites clientConfig)")
		for _, want := range config.Validating {
			got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: want.Name}, got)).To(Succeed())
			Expect(got.Webhooks).To(HaveLen(len(want.Webhooks)))
			for i := range want.Webhooks {
				w, g := *want.Webhooks[i].DeepCopy(), got.Webhooks[i]
				w.ClientConfig, g.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
				w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector = apiDefaults(w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.Rules)
				Expect(g).To(Equal(w), w.Name)
			}
		}
		for _, want := range config.Mutating {
			got := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: want.Name}, got)).To(Succeed())
			Expect(got.Webhooks).To(HaveLen(len(want.Webhooks)))
			for i := range want.Webhooks {
				w, g := *want.Webhooks[i].DeepCopy(), got.Webhooks[i]
				w.ClientConfig, g.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
				w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector = apiDefaults(w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.Rules)
				Expect(g).To(Equal(w), w.Name)
			}
		}

		By("webhooks.Setup serves every path the configuration calls")
		mux := hooks.mgr.GetWebhookServer().WebhookMux()
		for _, p := range paths {
			req, err := http.NewRequest(http.MethodPost, "https://localhost"+p, nil)
			Expect(err).NotTo(HaveOccurred())
			_, pattern := mux.Handler(req)
			Expect(pattern).To(Equal(p), "path %s is not served", p)
		}
	})
})

// apiDefaults fills what the API server defaults in a webhook it stores: matchPolicy
// Equivalent, empty selectors (everything), rule scope "*".
func apiDefaults(mp *admissionregistrationv1.MatchPolicyType, ns, obj *metav1.LabelSelector,
	rules []admissionregistrationv1.RuleWithOperations) (*admissionregistrationv1.MatchPolicyType, *metav1.LabelSelector, *metav1.LabelSelector) {
	if mp == nil {
		eq := admissionregistrationv1.Equivalent
		mp = &eq
	}
	if ns == nil {
		ns = &metav1.LabelSelector{}
	}
	if obj == nil {
		obj = &metav1.LabelSelector{}
	}
	for i := range rules {
		if rules[i].Scope == nil {
			all := admissionregistrationv1.AllScopes
			rules[i].Scope = &all
		}
	}
	return mp, ns, obj
}
