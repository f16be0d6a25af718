package webhooks

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// validatePodTemplate is spec.job.podTemplate's rule (jobs.ValidatePodTemplate, which
// jobs.Build applies too): CAPTF's labels, annotations, volume names and folders stay CAPTF's.
// It is pure.
func validatePodTemplate(spec *field.Path, s *infrav1.TerraformSpec) field.ErrorList {
	return jobs.ValidatePodTemplate(spec.Child("job", "podTemplate"), s.Job.PodTemplate)
}

// checkPodTemplateSecrets refuses a Secret volume of spec.job.podTemplate whose Secret exists
// and is of type kubernetes.io/service-account-token (jobs.CheckPodTemplateSecrets, the rule
// the controller applies before every Job). A Secret that is missing, or that cannot be read,
// is a warning: the controller checks again before every Job. reader nil skips the check.
func checkPodTemplateSecrets(ctx context.Context, reader client.Reader, namespace string, spec *field.Path, s *infrav1.TerraformSpec) (admission.Warnings, field.ErrorList) {
	if reader == nil || s.Job.PodTemplate == nil {
		return nil, nil
	}
	refused, missing, err := jobs.CheckPodTemplateSecrets(ctx, reader, namespace, s)
	if err != nil {
		return admission.Warnings{"CAPTF could not read the Secrets of spec.job.podTemplate.volumes (" + err.Error() +
			"); the controller checks them again before every Job"}, nil
	}
	var errs field.ErrorList
	for _, r := range refused {
		errs = append(errs, field.Forbidden(spec.Child("job", "podTemplate", "volumes").Index(r.Index).Child("secret", "name"), r.Message))
	}
	var warnings admission.Warnings
	if len(missing) > 0 {
		warnings = admission.Warnings{"the Secrets " + strings.Join(missing, ", ") + " of spec.job.podTemplate.volumes do not exist yet: " +
			"the controller checks their type before every Job, and the Job's pod waits for them"}
	}
	return warnings, errs
}

// podTemplateVolumesChanged reports whether an update changes spec.job.podTemplate.volumes:
// only then are their Secrets read again at admission, so an update of an admitted object
// (the controller's own writes) never waits on a Secret read.
func podTemplateVolumesChanged(oldSpec, newSpec *infrav1.TerraformSpec) bool {
	volumes := func(s *infrav1.TerraformSpec) []infrav1.RunnerVolume {
		if s.Job.PodTemplate == nil {
			return nil
		}
		return s.Job.PodTemplate.Volumes
	}
	return !equality.Semantic.DeepEqual(volumes(oldSpec), volumes(newSpec))
}
