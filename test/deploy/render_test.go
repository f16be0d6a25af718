package deploy_test

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

const (
	providerLabel      = "cluster.x-k8s.io/provider"
	providerLabelValue = "infrastructure-terraform"
	contractLabel      = "cluster.x-k8s.io/v1beta2"
	injectCAAnnotation = "cert-manager.io/inject-ca-from"
	infraGroup         = "infrastructure.cluster.x-k8s.io"
)

// webhookConfig is what a validating and a mutating configuration share, for the checks.
type webhookConfig struct {
	kind, name  string
	annotations map[string]string
	hooks       []hook
}

type hook struct {
	name              string
	service           *admissionregistrationv1.ServiceReference
	url               *string
	timeout           *int32
	sideEffects       *admissionregistrationv1.SideEffectClass
	reviewVersions    []string
	rules             []admissionregistrationv1.RuleWithOperations
	matchConditions   []admissionregistrationv1.MatchCondition
	namespaceSelector bool
}

func webhookConfigs(all objects) ([]webhookConfig, error) {
	var out []webhookConfig
	for _, u := range all.ofKind("ValidatingWebhookConfiguration") {
		v, err := as[admissionregistrationv1.ValidatingWebhookConfiguration](u)
		if err != nil {
			return nil, err
		}
		c := webhookConfig{kind: u.GetKind(), name: v.Name, annotations: v.Annotations}
		for _, w := range v.Webhooks {
			c.hooks = append(c.hooks, hook{w.Name, w.ClientConfig.Service, w.ClientConfig.URL, w.TimeoutSeconds, w.SideEffects,
				w.AdmissionReviewVersions, w.Rules, w.MatchConditions, w.NamespaceSelector != nil})
		}
		out = append(out, c)
	}
	for _, u := range all.ofKind("MutatingWebhookConfiguration") {
		m, err := as[admissionregistrationv1.MutatingWebhookConfiguration](u)
		if err != nil {
			return nil, err
		}
		c := webhookConfig{kind: u.GetKind(), name: m.Name, annotations: m.Annotations}
		for _, w := range m.Webhooks {
			c.hooks = append(c.hooks, hook{w.Name, w.ClientConfig.Service, w.ClientConfig.URL, w.TimeoutSeconds, w.SideEffects,
				w.AdmissionReviewVersions, w.Rules, w.MatchConditions, w.NamespaceSelector != nil})
		}
		out = append(out, c)
	}
	return out, nil
}

// managerDeployment returns the Deployment and its manager container.
func managerDeployment(all objects) (*appsv1.Deployment, *corev1.Container, error) {
	u, err := all.one("Deployment")
	if err != nil {
		return nil, nil, err
	}
	d, err := as[appsv1.Deployment](u)
	if err != nil {
		return nil, nil, err
	}
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "manager" {
			return d, &d.Spec.Template.Spec.Containers[i], nil
		}
	}
	return nil, nil, fmt.Errorf("deployment %s has no container named manager", d.Name)
}

func containerPort(c *corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// resolvesTo reports whether a Service port's targetPort reaches the container port.
func resolvesTo(target intstr.IntOrString, c *corev1.Container, port int32) bool {
	if target.Type == intstr.String {
		p, ok := containerPort(c, target.StrVal)
		return ok && p == port
	}
	return target.IntVal == port
}

// checkWebhooks is the shared assertion for a rendered or installed manifest: every webhook
// reaches the manager's webhook server through the Service, in at most 5 s, and every
// configuration gets its caBundle from the serving Certificate by cainjector.
func checkWebhooks(all objects) {
	configs, err := webhookConfigs(all)
	Expect(err).NotTo(HaveOccurred())
	Expect(configs).NotTo(BeEmpty(), "no webhook configurations rendered")
	d, c, err := managerDeployment(all)
	Expect(err).NotTo(HaveOccurred())

	// The certificate files the manager reads come from the Certificate's Secret.
	certDir, ok := argValue(c.Args, "webhook-cert-dir")
	Expect(ok).To(BeTrue(), "the manager has no --webhook-cert-dir")
	var certSecret string
	for _, m := range c.VolumeMounts {
		if m.MountPath == certDir {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					certSecret = v.Secret.SecretName
				}
			}
		}
	}
	Expect(certSecret).NotTo(BeEmpty(), "no Secret is mounted at --webhook-cert-dir %s", certDir)
	portArg, ok := argValue(c.Args, "webhook-port")
	Expect(ok).To(BeTrue(), "the manager has no --webhook-port")
	webhookPort, ok := containerPort(c, "webhook-server")
	Expect(ok).To(BeTrue(), "the manager container has no port named webhook-server")
	Expect(fmt.Sprint(webhookPort)).To(Equal(portArg))

	for _, cfg := range configs {
		ref := cfg.annotations[injectCAAnnotation]
		Expect(ref).NotTo(BeEmpty(), "%s %s has no %s annotation", cfg.kind, cfg.name, injectCAAnnotation)
		ns, name, _ := strings.Cut(ref, "/")
		cert := all.find("Certificate", ns, name)
		Expect(cert).NotTo(BeNil(), "%s %s: %s names %s, which is not rendered", cfg.kind, cfg.name, injectCAAnnotation, ref)
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		Expect(secretName).To(Equal(certSecret), "the injected CA's Certificate writes %s, the manager mounts %s", secretName, certSecret)
		Expect(cert.GetNamespace()).To(Equal(d.Namespace))
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")

		Expect(cfg.hooks).NotTo(BeEmpty(), "%s %s has no webhooks", cfg.kind, cfg.name)
		for _, h := range cfg.hooks {
			where := fmt.Sprintf("%s %s webhook %q", cfg.kind, cfg.name, h.name)
			Expect(h.url).To(BeNil(), "%s: calls a URL instead of the Service", where)
			Expect(h.service).NotTo(BeNil(), "%s: no clientConfig.service (a patch that matched no generated webhook?)", where)
			Expect(h.rules).NotTo(BeEmpty(), "%s: no rules", where)
			Expect(h.timeout).NotTo(BeNil(), "%s: no timeoutSeconds (the API server's default is 10 s)", where)
			Expect(*h.timeout).To(BeNumerically("<=", 5), "%s: timeoutSeconds", where)
			Expect(h.sideEffects).NotTo(BeNil(), where)
			Expect(*h.sideEffects).To(Equal(admissionregistrationv1.SideEffectClassNone), where)
			Expect(h.reviewVersions).To(ContainElement("v1"), where)

			svcU := all.find("Service", h.service.Namespace, h.service.Name)
			Expect(svcU).NotTo(BeNil(), "%s: Service %s/%s is not rendered", where, h.service.Namespace, h.service.Name)
			svc, err := as[corev1.Service](svcU)
			Expect(err).NotTo(HaveOccurred())
			Expect(svc.Spec.Selector).NotTo(BeEmpty(), where)
			Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(),
				"%s: Service %s selects %v, the manager's pods carry %v", where, svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
			svcPort := int32(443)
			if h.service.Port != nil {
				svcPort = *h.service.Port
			}
			reached := false
			for _, p := range svc.Spec.Ports {
				if p.Port == svcPort && resolvesTo(p.TargetPort, c, webhookPort) {
					reached = true
				}
			}
			Expect(reached).To(BeTrue(), "%s: Service %s port %d does not reach the webhook server's port %d", where, svc.Name, svcPort, webhookPort)
			Expect(dnsNames).To(ContainElement(svc.Name+"."+svc.Namespace+".svc"), "%s: the serving certificate does not name the Service", where)
		}
	}
}

// guardsUpdatesOfCAPTFKinds reports whether a webhook sees UPDATE of a CAPTF kind.
func guardsUpdatesOfCAPTFKinds(h hook) (update, status bool) {
	for _, r := range h.rules {
		if !slices.Contains(r.APIGroups, infraGroup) {
			continue
		}
		if !slices.Contains(r.Operations, admissionregistrationv1.Update) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue
		}
		update = true
		for _, res := range r.Resources {
			if strings.HasSuffix(res, "/status") {
				status = true
			}
		}
	}
	return update, status
}

// checkMatchConditions: the guard is called only for the removals it judges, and no validating
// webhook sees every update of a CAPTF object, so a webhook outage blocks nothing else.
func checkMatchConditions(all objects) {
	configs, err := webhookConfigs(all)
	Expect(err).NotTo(HaveOccurred())
	guards := 0
	for _, cfg := range configs {
		if cfg.kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for _, h := range cfg.hooks {
			update, status := guardsUpdatesOfCAPTFKinds(h)
			if !update {
				continue
			}
			Expect(h.matchConditions).NotTo(BeEmpty(), "validating webhook %q sees every update of a CAPTF kind: it needs matchConditions", h.name)
			if !status {
				continue
			}
			guards++
			var expr strings.Builder
			for _, mc := range h.matchConditions {
				expr.WriteString(mc.Expression)
			}
			for _, removal := range []string{infrav1.BlockMoveAnnotation, infrav1.Finalizer, "activeJob"} {
				Expect(expr.String()).To(ContainSubstring(removal), "the guard %q is not called for removals of %s", h.name, removal)
			}
		}
	}
	Expect(guards).To(BeNumerically(">=", 1), "no validating webhook guards the /status of the CAPTF kinds")
}

// checkManager: the Deployment as the issue asks for it.
func checkManager(all objects) {
	d, c, err := managerDeployment(all)
	Expect(err).NotTo(HaveOccurred())
	Expect(d.Spec.Replicas).NotTo(BeNil())
	Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
	Expect(c.Args).To(ContainElement("--leader-elect=true"))
	Expect(c.Args).To(ContainElement("--enable-webhooks=true"))
	Expect(c.Command).To(Equal([]string{"/manager"}))

	probe, ok := argValue(c.Args, "health-probe-bind-address")
	Expect(ok).To(BeTrue())
	_, probePort, _ := strings.Cut(probe, ":")
	Expect(c.ReadinessProbe).NotTo(BeNil(), "no readiness probe")
	Expect(c.LivenessProbe).NotTo(BeNil(), "no liveness probe")
	for path, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		Expect(p.HTTPGet).NotTo(BeNil())
		Expect(p.HTTPGet.Path).To(Equal(path))
		port := p.HTTPGet.Port
		if port.Type == intstr.String {
			n, ok := containerPort(c, port.StrVal)
			Expect(ok).To(BeTrue(), "probe port %s is not a container port", port.StrVal)
			port = intstr.FromInt32(n)
		}
		Expect(port.String()).To(Equal(probePort), "%s probes port %s, the manager serves probes on %s", path, port.String(), probe)
	}

	Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
	Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
	psc := d.Spec.Template.Spec.SecurityContext
	Expect(psc).NotTo(BeNil())
	Expect(psc.RunAsNonRoot).To(HaveValue(BeTrue()))
	Expect(psc.SeccompProfile).NotTo(BeNil())
	sc := c.SecurityContext
	Expect(sc).NotTo(BeNil())
	Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	Expect(sc.Capabilities).NotTo(BeNil())
	Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))

	// The manager knows its own identity from the downward API: its Pod's ServiceAccount.
	id, err := managerIdentity(d, c)
	Expect(err).NotTo(HaveOccurred())
	Expect(id).To(Equal(d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName), "the manager's own identity")

	// The manager's soft memory limit follows its container's memory limit (downward API).
	Expect(memoryLimit(c)).To(Equal(c.Resources.Limits.Memory().Value()/100*setup.MemoryLimitPercent),
		"the manager's soft memory limit is not %d %% of its container's", setup.MemoryLimitPercent)

	// Jobs copy the runner from the manager's own image.
	runner, ok := argValue(c.Args, "runner-image")
	Expect(ok).To(BeTrue(), "the manager has no --runner-image")
	Expect(runner).To(Equal(c.Image), "--runner-image differs from the manager's image")

	pdbU, err := all.one("PodDisruptionBudget")
	Expect(err).NotTo(HaveOccurred())
	pdb, err := as[policyv1.PodDisruptionBudget](pdbU)
	Expect(err).NotTo(HaveOccurred())
	Expect(pdb.Namespace).To(Equal(d.Namespace))
	Expect(pdb.Spec.Selector).NotTo(BeNil())
	sel, err := labelSelector(pdb)
	Expect(err).NotTo(HaveOccurred())
	Expect(sel.Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(), "the PDB does not select the manager's pods")
	Expect(pdb.Spec.MinAvailable).NotTo(BeNil())
	Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
}

func labelSelector(pdb *policyv1.PodDisruptionBudget) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(pdb.Spec.Selector.MatchLabels)
}

// checkLabels: clusterctl finds the provider's objects by the provider label, and Cluster API
// finds the version of each kind that serves the contract by the contract label.
func checkLabels(all objects) {
	crds := all.ofKind("CustomResourceDefinition")
	Expect(crds).To(HaveLen(8))
	for _, crd := range crds {
		if crd.GetName() == "terraformplanpolicies."+infraGroup || crd.GetName() == "terraformidentities."+infraGroup {
			// CAPTF's own configuration: no kind of the Cluster API contract.
			Expect(crd.GetLabels()).NotTo(HaveKey(contractLabel), crd.GetName())
			continue
		}
		Expect(crd.GetLabels()).To(HaveKeyWithValue(contractLabel, "v1alpha1"), crd.GetName())
	}
	for _, u := range all {
		Expect(u.GetLabels()).To(HaveKeyWithValue(providerLabel, providerLabelValue), "%s %s", u.GetKind(), u.GetName())
	}
}

var _ = Describe("config/default rendered by kustomize", func() {
	var all objects

	BeforeEach(func() {
		var err error
		all, err = kustomizeBuild("config/default")
		Expect(err).NotTo(HaveOccurred())
	})

	It("labels every object for clusterctl and every CRD with the contract version", func() {
		checkLabels(all)
	})

	It("installs everything into captf-system", func() {
		ns, err := all.one("Namespace")
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.GetName()).To(Equal("captf-system"))
		for _, u := range all {
			switch u.GetKind() {
			case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
				"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				Expect(u.GetNamespace()).To(BeEmpty(), "%s %s", u.GetKind(), u.GetName())
			default:
				Expect(u.GetNamespace()).To(Equal("captf-system"), "%s %s", u.GetKind(), u.GetName())
			}
		}
	})

	It("wires every webhook to the manager with a cert-manager CA and at most a 5 s timeout", func() {
		checkWebhooks(all)
	})

	It("calls the validating webhooks only for the requests they judge (matchConditions)", func() {
		checkMatchConditions(all)
	})

	It("runs two manager replicas with leader election, probes, limits, least privilege and a PDB", func() {
		checkManager(all)
	})

	It("binds the plan-approval policy to the ConfigMap the manager keeps, for updates only", func() {
		checkPlanPolicy(all)
	})

	It("refuses deleting a namespace that holds a CAPTF object with its finalizer, for each kind", func() {
		checkNamespacePolicy(all)
	})

	It("issues the serving certificate from a CA, so a renewal keeps the caBundle", func() {
		certs := all.ofKind("Certificate")
		issuers := all.ofKind("Issuer")
		Expect(certs).To(HaveLen(2))
		Expect(issuers).To(HaveLen(2))
		byName := map[string]*unstructured.Unstructured{}
		for _, i := range issuers {
			byName[i.GetName()] = i
		}
		for _, c := range certs {
			issuer, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
			Expect(byName).To(HaveKey(issuer), "Certificate %s names Issuer %s, which is not rendered", c.GetName(), issuer)
			isCA, _, _ := unstructured.NestedBool(c.Object, "spec", "isCA")
			_, selfSigned, _ := unstructured.NestedMap(byName[issuer].Object, "spec", "selfSigned")
			caSecret, viaCA, _ := unstructured.NestedString(byName[issuer].Object, "spec", "ca", "secretName")
			if isCA {
				Expect(selfSigned).To(BeTrue(), "the CA %s is not self-signed", c.GetName())
				continue
			}
			Expect(viaCA).To(BeTrue(), "the serving certificate %s is not signed by the CA Issuer", c.GetName())
			found := false
			for _, ca := range certs {
				s, _, _ := unstructured.NestedString(ca.Object, "spec", "secretName")
				isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA")
				found = found || (isCA && s == caSecret)
			}
			Expect(found).To(BeTrue(), "the CA Issuer reads %s, which no CA Certificate writes", caSecret)
		}
	})

})

// checkPlanPolicy: the ValidatingAdmissionPolicy of config/policy judges only UPDATEs of the
// three kinds (clusterctl move creates them with their annotations), denies, and reads its
// groups from the ConfigMap the manager writes (webhooks.PlanApproversConfigMap) in the
// manager's namespace, which ships so that the parameter is never missing.
func checkPlanPolicy(all objects) {
	pu := all.named("ValidatingAdmissionPolicy", "captf-plan-approvers")
	Expect(pu).NotTo(BeNil())
	policy, err := as[admissionregistrationv1.ValidatingAdmissionPolicy](pu)
	Expect(err).NotTo(HaveOccurred())
	bu := all.named("ValidatingAdmissionPolicyBinding", "captf-plan-approvers")
	Expect(bu).NotTo(BeNil())
	binding, err := as[admissionregistrationv1.ValidatingAdmissionPolicyBinding](bu)
	Expect(err).NotTo(HaveOccurred())
	d, _, err := managerDeployment(all)
	Expect(err).NotTo(HaveOccurred())

	Expect(binding.Spec.PolicyName).To(Equal(policy.Name))
	Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
	Expect(policy.Spec.FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)))
	Expect(policy.Spec.ParamKind).NotTo(BeNil())
	Expect(policy.Spec.ParamKind.Kind).To(Equal("ConfigMap"))
	ref := binding.Spec.ParamRef
	Expect(ref).NotTo(BeNil())
	Expect(ref.Name).To(Equal(webhooks.PlanApproversConfigMap))
	Expect(ref.Namespace).To(Equal(d.Namespace), "the manager writes the ConfigMap into its own namespace")
	Expect(ref.ParameterNotFoundAction).To(HaveValue(Equal(admissionregistrationv1.DenyAction)))
	Expect(all.find("ConfigMap", ref.Namespace, ref.Name)).NotTo(BeNil(), "the parameter ships with the manifests")

	Expect(policy.Spec.MatchConstraints).NotTo(BeNil())
	for _, r := range policy.Spec.MatchConstraints.ResourceRules {
		Expect(r.Operations).To(ConsistOf(admissionregistrationv1.Update), "the policy judges updates only")
		Expect(r.APIGroups).To(ConsistOf(infraGroup))
		Expect(r.Resources).To(ConsistOf("terraformclusters", "terraformmachines", "terraformmachinepools"))
	}
	var expr strings.Builder
	for _, mc := range policy.Spec.MatchConditions {
		expr.WriteString(mc.Expression)
	}
	Expect(expr.String()).To(ContainSubstring(infrav1.ApprovePlanAnnotation), "the policy matches only approvals")
}

// checkNamespacePolicy: the namespace-deletion policies of config/policy/namespace-deletion,
// one per kind with that kind as its parameter, judge only namespace DELETEs, deny, fail
// closed, and look their parameters up in the namespace being deleted (no paramRef namespace),
// allowing a namespace with none. Their rule is the same text for the three kinds.
func checkNamespacePolicy(all objects) {
	var rules []string
	for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
		name := "captf-namespace-deletion-" + strings.ToLower(kind) + "s"
		pu := all.named("ValidatingAdmissionPolicy", name)
		Expect(pu).NotTo(BeNil(), "policy %s", name)
		policy, err := as[admissionregistrationv1.ValidatingAdmissionPolicy](pu)
		Expect(err).NotTo(HaveOccurred())
		bu := all.named("ValidatingAdmissionPolicyBinding", name)
		Expect(bu).NotTo(BeNil(), "binding %s", name)
		binding, err := as[admissionregistrationv1.ValidatingAdmissionPolicyBinding](bu)
		Expect(err).NotTo(HaveOccurred())

		Expect(binding.Spec.PolicyName).To(Equal(policy.Name))
		Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
		Expect(policy.Spec.FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)))
		Expect(policy.Spec.ParamKind).NotTo(BeNil())
		Expect(policy.Spec.ParamKind.APIVersion).To(Equal(infrav1.GroupVersion.String()))
		Expect(policy.Spec.ParamKind.Kind).To(Equal(kind))
		ref := binding.Spec.ParamRef
		Expect(ref).NotTo(BeNil())
		Expect(ref.Name).To(BeEmpty())
		Expect(ref.Namespace).To(BeEmpty(), "the parameters are the objects of the namespace being deleted")
		Expect(ref.Selector).NotTo(BeNil())
		Expect(ref.Selector.MatchLabels).To(BeEmpty())
		Expect(ref.Selector.MatchExpressions).To(BeEmpty())
		Expect(ref.ParameterNotFoundAction).To(HaveValue(Equal(admissionregistrationv1.AllowAction)))

		Expect(policy.Spec.MatchConstraints).NotTo(BeNil())
		Expect(policy.Spec.MatchConstraints.ResourceRules).To(HaveLen(1))
		r := policy.Spec.MatchConstraints.ResourceRules[0]
		Expect(r.Operations).To(ConsistOf(admissionregistrationv1.Delete))
		Expect(r.APIGroups).To(ConsistOf(""))
		Expect(r.Resources).To(ConsistOf("namespaces"))
		Expect(policy.Spec.Validations).To(HaveLen(1))
		v := policy.Spec.Validations[0]
		Expect(v.Expression).To(ContainSubstring(infrav1.Finalizer))
		rules = append(rules, v.Expression+"\n"+v.MessageExpression)
	}
	Expect(rules[1]).To(Equal(rules[0]))
	Expect(rules[2]).To(Equal(rules[0]))
	Expect(all.ofKind("ValidatingAdmissionPolicy")).To(HaveLen(5), "the plan-approval policy, three namespace-deletion policies and the template-immutability policy")
	Expect(all.ofKind("ValidatingAdmissionPolicyBinding")).To(HaveLen(5))
}
