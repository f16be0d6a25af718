package webhooks

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Module source kinds, as ModuleSourceKind names them.
const (
	ModuleSourceImage     = "image"
	ModuleSourceConfigMap = "configMap"
)

// ModuleSourceKind says where a module comes from: ModuleSourceImage, ModuleSourceConfigMap,
// or "" when neither is set (the schema refuses that).
func ModuleSourceKind(m infrav1.ModuleSource) string {
	switch {
	case m.ConfigMap != nil:
		return ModuleSourceConfigMap
	case m.Image != "":
		return ModuleSourceImage
	}
	return ""
}

// ValidateTerraformSpec checks what the schema cannot: variable names, reserved environment
// names, the lock timeout against the deadline, the CLI configuration's credential hosts, and
// spec.job.podTemplate's reserved names and folders. path is where the spec sits (spec, or
// spec.template.spec for a template). It is pure.
func ValidateTerraformSpec(path *field.Path, s *infrav1.TerraformSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateVariables(path.Child("variables"), s)...)
	errs = append(errs, validateEnv(path.Child("job", "env"), s.Job)...)
	errs = append(errs, validateLockTimeout(path.Child("job"), s.Job)...)
	errs = append(errs, validateCLIConfig(path.Child("job", "cliConfig"), s.Job.CLIConfig)...)
	errs = append(errs, validatePodTemplate(path, s)...)
	return errs
}

func validateVariables(path *field.Path, s *infrav1.TerraformSpec) field.ErrorList {
	if s.Variables == nil || len(s.Variables.Raw) == 0 {
		return nil
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(s.Variables.Raw, &vars); err != nil {
		// The value is not echoed: variables may hold secrets.
		return field.ErrorList{field.Invalid(path, "<omitted>", "must be a JSON object whose keys are Terraform variable names")}
	}
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if err := inputs.ValidateVariableName(name, path.String()); err != nil {
			errs = append(errs, field.Invalid(path.Key(name), name, err.Error()))
		}
	}
	return errs
}

func validateEnv(path *field.Path, p infrav1.JobPolicy) field.ErrorList {
	var errs field.ErrorList
	for i, e := range p.Env {
		if jobs.IsReservedEnv(e.Name) {
			errs = append(errs, field.Forbidden(path.Index(i).Child("name"), fmt.Sprintf(
				"%s is reserved: CAPTF sets it itself, or it would move the Terraform state, change the runner's commands or bypass the inputs hash; reserved names: %s",
				e.Name, strings.Join(jobs.ReservedEnv, ", "))))
		}
	}
	return errs
}

func validateLockTimeout(path *field.Path, p infrav1.JobPolicy) field.ErrorList {
	lock, deadline := p.EffectiveLockTimeoutSeconds(), p.EffectiveActiveDeadlineSeconds()
	if lock < deadline {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("lockTimeoutSeconds"), lock, fmt.Sprintf(
		"must be below the Job deadline (activeDeadlineSeconds %d): a run that waits that long for the state lock can never apply; lower it or raise activeDeadlineSeconds",
		deadline))}
}

// ValidateTerraformSpecUpdate checks the fields that must not change once the object's
// infrastructure was provisioned: the module's source kind (image or ConfigMap). A module
// image runs its own terraform/tofu; a ConfigMap module runs the manager's runtime image.
// Switching swaps the binary that owns the state (and may upgrade its format irreversibly)
// and the module layout in one step. A new image or ConfigMap of the same kind stays allowed:
// that is the normal way to change a module. It is pure.
func ValidateTerraformSpecUpdate(path *field.Path, oldSpec, newSpec *infrav1.TerraformSpec, provisioned bool) field.ErrorList {
	if !provisioned {
		return nil
	}
	was, is := ModuleSourceKind(oldSpec.Module), ModuleSourceKind(newSpec.Module)
	if was == is || was == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Child("module"), fmt.Sprintf(
		"the module source kind cannot change from %s to %s once the infrastructure is provisioned: the other kind runs another terraform/tofu binary against the same state; "+
			"change the %s instead, or create a new object", was, is, was))}
}

// Provisioned reports whether the object's infrastructure was provisioned: the status says so,
// or the controller recorded a successful apply in the captf.io/applied-hash annotation (which,
// unlike status, survives clusterctl move).
func Provisioned(annotations map[string]string, status *infrav1.TerraformStatus) bool {
	if status != nil && status.IsProvisioned() {
		return true
	}
	_, ok := annotations[infrav1.AppliedHashAnnotation]
	return ok
}

// ValidateTemplateMetadata checks the annotations a template stamps onto every object Cluster
// API creates from it (spec.template.metadata.annotations; path is that field): none may be one
// of the manager's records (infrav1.ManagerRecordAnnotations) or a guarded request
// (infrav1.GuardedRequestAnnotations). Cluster API creates those objects as its own identity,
// which the guard lets create what a tenant may not, so a template would otherwise carry a
// forged record or an unjudged approval, adoption or abandon into every object. It is pure.
func ValidateTemplateMetadata(path *field.Path, annotations map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		switch {
		case infrav1.IsManagerRecordAnnotation(k):
			errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
				"%s is one of the CAPTF manager's records (docs/webhooks.md): a template must not stamp it onto the objects Cluster API creates; remove it from the template", k)))
		case slices.Contains(infrav1.GuardedRequestAnnotations(), k):
			errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
				"%s is a request the CAPTF guard judges on each object (docs/webhooks.md): a template must not stamp it onto the objects Cluster API creates; remove it from the template and set it on the object itself", k)))
		case k == infrav1.TargetOperationAnnotation:
			errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
				"%s asks one object's next apply to replace or import one resource (docs/state.md, \"Targeted operations\"): a template must not stamp it onto every object Cluster API creates; set it on the object itself", k)))
		}
	}
	return errs
}

var targetOperationPath = field.NewPath("metadata", "annotations").Key(infrav1.TargetOperationAnnotation)

// ValidateTargetOperation refuses a targeted operation (captf.io/target-operation) that
// runnerapi.ParseTarget does not read: on create (oldAnnotations nil), and on an update that
// sets or changes it (an update that keeps a value is not judged again, so the controller's own
// writes never fail on it). It is pure.
func ValidateTargetOperation(oldAnnotations, newAnnotations map[string]string) field.ErrorList {
	v, ok := newAnnotations[infrav1.TargetOperationAnnotation]
	if !ok {
		return nil
	}
	if old, had := oldAnnotations[infrav1.TargetOperationAnnotation]; had && old == v {
		return nil
	}
	if _, err := runnerapi.ParseTarget(v); err != nil {
		return field.ErrorList{field.Invalid(targetOperationPath, v, err.Error()+` (docs/state.md, "Targeted operations")`)}
	}
	return nil
}

var managedByPath = field.NewPath("metadata", "annotations").Key(infrav1.ManagedByAnnotation)

// ValidateExternallyManaged refuses an infrastructure cluster marked as managed by someone else
// (cluster.x-k8s.io/managed-by, infrav1.ExternallyManaged) that carries CAPTF's finalizer: on
// create (oldAnnotations nil), and on an update that adds the mark. CAPTF leaves a marked object
// alone, so one it manages (its finalizer stands for a state and for infrastructure to destroy)
// must never be marked: its deletion would wait for good. An update that keeps the mark is not
// judged again. It is pure.
func ValidateExternallyManaged(oldAnnotations map[string]string, obj metav1.Object) field.ErrorList {
	if !infrav1.ExternallyManaged(obj) || !slices.Contains(obj.GetFinalizers(), infrav1.Finalizer) {
		return nil
	}
	if _, had := oldAnnotations[infrav1.ManagedByAnnotation]; had {
		return nil
	}
	return field.ErrorList{field.Forbidden(managedByPath, fmt.Sprintf(
		"CAPTF manages this TerraformCluster (it carries the finalizer %s), and leaves an externally managed one alone: "+
			"mark an infrastructure cluster as managed by someone else when you create it (CAPTF then adds no finalizer), "+
			"or delete this one first (spec.deletionPolicy: Retain keeps its infrastructure; docs/lifecycle.md, \"Externally managed clusters\")",
		infrav1.Finalizer))}
}
