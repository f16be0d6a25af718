package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/planpolicy"
)

// Plan policies are validated as the other kinds' specs are: CREATE fails closed (a policy the
// engine could not evaluate never exists), UPDATE fails open and sees only spec changes (the
// patch in config/webhook), and a rule that slipped through a webhook outage does not compile in
// the engine either, which counts it as broken and holds the plans it judges.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformplanpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformplanpolicies,verbs=create,versions=v1alpha1,name=validate.terraformplanpolicy.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformplanpolicy,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformplanpolicies,verbs=update,versions=v1alpha1,name=validate-update.terraformplanpolicy.captf.io,admissionReviewVersions=v1,timeoutSeconds=5

// TerraformPlanPolicyKind is the kind of a plan policy.
const TerraformPlanPolicyKind = "TerraformPlanPolicy"

// PlanPolicyValidator refuses a TerraformPlanPolicy whose rules do not compile, do not return a
// bool, or cost more than the limit (planpolicy.Validate, the one check the engine relies on).
type PlanPolicyValidator struct{}

var planPolicySpecPath = field.NewPath("spec")

// ValidateCreate implements admission.Validator.
func (PlanPolicyValidator) ValidateCreate(_ context.Context, p *infrav1.TerraformPlanPolicy) (admission.Warnings, error) {
	return nil, invalid(TerraformPlanPolicyKind, p.Name, planpolicy.Validate(p.Spec, planPolicySpecPath))
}

// ValidateUpdate implements admission.Validator.
func (PlanPolicyValidator) ValidateUpdate(_ context.Context, _, p *infrav1.TerraformPlanPolicy) (admission.Warnings, error) {
	if !p.GetDeletionTimestamp().IsZero() {
		return nil, nil
	}
	return nil, invalid(TerraformPlanPolicyKind, p.Name, planpolicy.Validate(p.Spec, planPolicySpecPath))
}

// ValidateDelete implements admission.Validator; deletions are not validated.
func (PlanPolicyValidator) ValidateDelete(context.Context, *infrav1.TerraformPlanPolicy) (admission.Warnings, error) {
	return nil, nil
}
