package webhooks_test

// The policies of config/policy (plan approval, namespace deletion, template immutability), rendered through
// config/default (so they carry the names and the namespace they ship with) and installed into
// the suite's control plane.

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// renderedPolicy is what config/default installs for the plan approvers, and the
// namespace-deletion policies and bindings (one of each per kind).
type renderedPolicy struct {
	Policy    *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding   *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	ConfigMap *corev1.ConfigMap

	NamespaceDeletion []client.Object
	// TemplateImmutability is the template-immutability policy and its binding.
	TemplateImmutability []client.Object
}

// templateImmutabilityPolicy says whether a rendered policy or binding is the
// template-immutability rule's.
func templateImmutabilityPolicy(name string) bool {
	return strings.HasSuffix(name, "template-immutability")
}

// namespaceDeletionPolicy says whether a rendered policy or binding is one of the
// namespace-deletion rule's.
func namespaceDeletionPolicy(name string) bool {
	return strings.Contains(name, "namespace-deletion-")
}

// renderPolicy runs `kubectl kustomize config/default` and picks the policy, its binding and
// its ConfigMap.
func renderPolicy(kubectl string) (*renderedPolicy, error) {
	docs, err := kustomize(kubectl, "default")
	if err != nil {
		return nil, err
	}
	r := &renderedPolicy{}
	for _, doc := range docs {
		var head struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := utilyaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("read kind: %w", err)
		}
		var into any
		switch {
		case head.Kind == "ValidatingAdmissionPolicy" && templateImmutabilityPolicy(head.Name):
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			r.TemplateImmutability = append(r.TemplateImmutability, p)
			into = p
		case head.Kind == "ValidatingAdmissionPolicyBinding" && templateImmutabilityPolicy(head.Name):
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			r.TemplateImmutability = append(r.TemplateImmutability, b)
			into = b
		case head.Kind == "ValidatingAdmissionPolicy" && namespaceDeletionPolicy(head.Name):
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			r.NamespaceDeletion = append(r.NamespaceDeletion, p)
			into = p
		case head.Kind == "ValidatingAdmissionPolicyBinding" && namespaceDeletionPolicy(head.Name):
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			r.NamespaceDeletion = append(r.NamespaceDeletion, b)
			into = b
		case head.Kind == "ValidatingAdmissionPolicy":
			r.Policy = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			into = r.Policy
		case head.Kind == "ValidatingAdmissionPolicyBinding":
			r.Binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			into = r.Binding
		case head.Kind == "ConfigMap" && head.Name == webhooks.PlanApproversConfigMap:
			r.ConfigMap = &corev1.ConfigMap{}
			into = r.ConfigMap
		default:
			continue
		}
		if err := utilyaml.Unmarshal(doc, into); err != nil {
			return nil, fmt.Errorf("decode %s: %w", head.Kind, err)
		}
	}
	if r.Policy == nil || r.Binding == nil || r.ConfigMap == nil {
		return nil, fmt.Errorf("config/default renders no plan-approval policy, binding or ConfigMap %s", webhooks.PlanApproversConfigMap)
	}
	if len(r.NamespaceDeletion) != 6 {
		return nil, fmt.Errorf("config/default renders %d namespace-deletion policies and bindings, want one of each per kind (6)", len(r.NamespaceDeletion))
	}
	if len(r.TemplateImmutability) != 2 {
		return nil, fmt.Errorf("config/default renders %d template-immutability policies and bindings, want one of each", len(r.TemplateImmutability))
	}
	return r, nil
}

// installPolicy creates the rendered objects (the ConfigMap's namespace first) and writes
// groups into the ConfigMap with the manager's own code.
func installPolicy(r *renderedPolicy, groups []string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ConfigMap.Namespace}}
	if err := admin.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	objs := []client.Object{r.ConfigMap.DeepCopy(), r.Policy.DeepCopy(), r.Binding.DeepCopy()}
	for _, o := range append(append([]client.Object{}, r.NamespaceDeletion...), r.TemplateImmutability...) {
		objs = append(objs, o.DeepCopyObject().(client.Object))
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	if _, err := setup.SyncPlanApprovers(ctx, admin, r.ConfigMap.Namespace, groups, true); err != nil {
		return err
	}
	return nil
}

// waitForPolicy waits until the API server enforces the installed policy: a dry-run approval
// by a user outside the approver groups is refused by it. (The API server loads a new policy,
// its binding and its parameter asynchronously.) Every spec that expects the policy's denial
// calls it first; once the policy is loaded it returns at the first try.
func waitForPolicy() {
	GinkgoHelper()
	c, _ := userClient("policy-probe", "devs")
	ns := newNamespace()
	create(infrav1.TerraformClusterKind, ns, "probe")
	Eventually(func() error {
		return approve(c, infrav1.TerraformClusterKind, ns, "probe", "0", client.DryRunAll)
	}).Should(Satisfy(deniedByPolicy), "the plan-approval policy never refused a user outside the approver groups")
}
