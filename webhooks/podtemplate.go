package webhooks

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// validatePodTemplate is spec.job.podTemplate's rule (jobs.ValidatePodTemplate, which
// jobs.Build applies too): CAPTF's labels, annotations, volume names and folders stay CAPTF's.
// It is pure.
func validatePodTemplate(spec *field.Path, s *infrav1.TerraformSpec) field.ErrorList {
	return jobs.ValidatePodTemplate(spec.Child("job", "podTemplate"), s.Job.PodTemplate)
}
