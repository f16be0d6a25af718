package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// checkIdentityRef judges spec.job.identityRef of an object in namespace with the rule the
// engine applies before every Job (jobs.CheckTerraformIdentity, reading the identity and the
// Namespace through reader, the API server): an identity that does not allow the namespace,
// or whose variables the object cannot take, is forbidden. A missing identity is only a
// warning, as a missing ServiceAccount is: the platform may create it after the object (or a
// `clusterctl move` may bring the object first), and until then the object runs no Job
// (InputsValid=False, IdentityNotFound). A failed read is a warning too; the engine asks
// again. reader nil skips the check.
func checkIdentityRef(ctx context.Context, reader client.Reader, namespace string, spec *field.Path, s *infrav1.TerraformSpec) (admission.Warnings, field.ErrorList) {
	if s.Job.IdentityRef == nil || reader == nil {
		return nil, nil
	}
	_, reason, msg, err := jobs.CheckTerraformIdentity(ctx, reader, namespace, s)
	switch {
	case err != nil:
		return admission.Warnings{"CAPTF could not check TerraformIdentity " + s.Job.IdentityRef.Name + " (" + err.Error() +
			"); the controller checks it again before every Job"}, nil
	case reason == infrav1.IdentityNotFoundReason:
		return admission.Warnings{msg + " (InputsValid=False, " + reason + ")"}, nil
	case reason != "":
		return nil, field.ErrorList{field.Forbidden(spec.Child("job", "identityRef", "name"), msg)}
	}
	return nil, nil
}

// identityRefChanged reports whether an update sets spec.job.identityRef or names another
// identity: only then is it judged again at admission (the engine judges it before every Job).
func identityRefChanged(oldSpec, newSpec *infrav1.TerraformSpec) bool {
	return setOrChanged(oldSpec.Job.IdentityRef, newSpec.Job.IdentityRef, func(r *infrav1.TerraformIdentityRef) string { return r.Name })
}
