package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/planpolicy"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplanpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// policyGate is what the plan policies that select one object judge its plans with: the
// policies and the labels of its namespace, as the pass found them in the cache.
type policyGate struct {
	policies []infrav1.TerraformPlanPolicy
	nsLabels map[string]string
}

// gatherPlanPolicies finds the plan policies that select the object (from the cache: the
// policies, and the metadata of its namespace; planpolicy.Selecting). An object any policy
// selects applies only through a saved plan (decide.NeedsPlan).
func gatherPlanPolicies(ctx context.Context, cache client.Reader, namespace string) (policyGate, error) {
	var list infrav1.TerraformPlanPolicyList
	if err := cache.List(ctx, &list); err != nil {
		return policyGate{}, fmt.Errorf("list plan policies: %w", err)
	}
	if len(list.Items) == 0 {
		return policyGate{}, nil
	}
	ns := NamespaceMetadata()
	if err := cache.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return policyGate{}, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	selected, unparsable := planpolicy.Selecting(list.Items, ns.GetLabels())
	for name, err := range unparsable {
		log.FromContext(ctx).Info("a plan policy's namespace selector does not parse; it selects every object", "policy", name, "error", err.Error())
	}
	return policyGate{policies: selected, nsLabels: ns.GetLabels()}, nil
}

// NamespaceMetadata is the metadata-only type of the cached Namespaces: a plan policy selects
// objects by their namespace's labels.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// judgePlan evaluates the selecting policies on the plan the plan Secret holds; refresh-only
// plans change no infrastructure and are not judged.
func (g policyGate) judgePlan(ctx context.Context, about client.Object, sec *corev1.Secret, rec runnerapi.PlanRecord) []string {
	if len(g.policies) == 0 || rec.RefreshOnly {
		return nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(about)
	if err != nil {
		return []string{fmt.Sprintf("plan policies: the object cannot be read as data: %v", err)}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	v := planpolicy.Judge(ctx, g.policies, planpolicy.Input{PlanJSON: sec.Data[runnerapi.PlanJSONKey], Summary: rec.PlanSummary,
		Object: obj, Namespace: about.GetNamespace(), NamespaceLabels: g.nsLabels})
	log.FromContext(ctx).Info("plan policies judged the plan", "planID", rec.ID, "policies", len(g.policies), "violations", len(v))
	return v
}
