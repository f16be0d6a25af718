package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// checkAudience judges spec.job.identityToken's audience with the rule the controller applies
// before every Job (jobs.CheckIdentityAudience): an audience the API server accepts is
// forbidden. When the API server cannot be asked (prober nil, or the probe fails) only the
// well-known audiences are refused here, with a warning that the controller asks again
// before every Job (and holds the object if the audience is accepted).
func checkAudience(ctx context.Context, prober jobs.AudienceProber, spec *field.Path, s *infrav1.TerraformSpec) (admission.Warnings, field.ErrorList) {
	id := s.Job.IdentityToken
	if id == nil {
		return nil, nil
	}
	path := spec.Child("job", "identityToken", "audience")
	var warnings admission.Warnings
	reason, msg := "", ""
	if prober != nil {
		var err error
		if reason, msg, err = jobs.CheckIdentityAudience(ctx, prober, s); err != nil {
			warnings = admission.Warnings{"CAPTF could not ask the API server whether it accepts the identity token audience " + id.Audience +
				" (" + err.Error() + "); the controller asks again before every Job and runs none while it does"}
		}
	}
	if prober == nil {
		// The well-known list alone (CheckIdentityAudience applies it before asking, too).
		reason, msg = jobs.IdentityAudienceRefusal(id.Audience)
	}
	if reason != "" {
		return nil, field.ErrorList{field.Forbidden(path, msg)}
	}
	return warnings, nil
}

// audienceChanged reports whether an update sets spec.job.identityToken or changes its
// audience: only then is the API server asked again at admission.
func audienceChanged(oldSpec, newSpec *infrav1.TerraformSpec) bool {
	return setOrChanged(oldSpec.Job.IdentityToken, newSpec.Job.IdentityToken, func(t *infrav1.IdentityToken) string { return t.Audience })
}

// setOrChanged reports whether an update sets an optional field (n) the old object did not
// have (o nil), or gives it another key.
func setOrChanged[T any, K comparable](o, n *T, key func(*T) K) bool {
	if n == nil {
		return false
	}
	return o == nil || key(o) != key(n)
}
