package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/planpolicy"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplanpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// gatherPlanPolicies finds the plan policies that select the object (from the cache: the
// policies, and the metadata of its namespace). An object any policy selects applies only
// through a saved plan (decide.NeedsPlan).
func (p *pass) gatherPlanPolicies(ctx context.Context) error {
	var list infrav1.TerraformPlanPolicyList
	if err := p.r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list plan policies: %w", err)
	}
	p.policies = nil
	if len(list.Items) == 0 {
		p.ev.Plan.PolicySelected = false
		return nil
	}
	ns := NamespaceMetadata()
	if err := p.r.Client.Get(ctx, types.NamespacedName{Name: p.obj.GetNamespace()}, ns); err != nil {
		return fmt.Errorf("read namespace %s: %w", p.obj.GetNamespace(), err)
	}
	p.nsLabels = ns.GetLabels()
	for _, pol := range list.Items {
		ok, err := planpolicy.Selects(&pol, p.nsLabels)
		if err != nil {
			// The webhook refuses a selector that does not parse; one that slipped through
			// selects the object, so it holds the object's plans rather than letting them by.
			log.FromContext(ctx).Info("a plan policy's namespace selector does not parse; it selects every object", "policy", pol.Name, "error", err.Error())
			ok = true
		}
		if ok {
			p.policies = append(p.policies, pol)
		}
	}
	p.ev.Plan.PolicySelected = len(p.policies) > 0
	return nil
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
func (p *pass) judgePlan(ctx context.Context, sec *corev1.Secret, rec runnerapi.PlanRecord) []string {
	if len(p.policies) == 0 || rec.RefreshOnly {
		return nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.obj)
	if err != nil {
		return []string{fmt.Sprintf("plan policies: the object cannot be read as data: %v", err)}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	v := planpolicy.Judge(ctx, p.policies, planpolicy.Input{PlanJSON: sec.Data[runnerapi.PlanJSONKey], Summary: rec.PlanSummary,
		Object: obj, Namespace: p.obj.GetNamespace(), NamespaceLabels: p.nsLabels})
	log.FromContext(ctx).Info("plan policies judged the plan", "planID", rec.ID, "policies", len(p.policies), "violations", len(v))
	return v
}
