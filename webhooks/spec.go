package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// Reconciled is what the defaulter and the validator need of TerraformCluster,
// TerraformMachine and TerraformMachinePool.
type Reconciled interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// Defaulter is the mutating webhook of a reconciled kind, called on CREATE: it adds the
// provider finalizer, so no object is ever without it, and fills the defaults the schema
// cannot express (DefaultTerraformSpec). It is idempotent, so reinvocation is safe.
type Defaulter[T Reconciled] struct{}

var _ admission.Defaulter[*infrav1.TerraformCluster] = Defaulter[*infrav1.TerraformCluster]{}

// Default implements admission.Defaulter.
func (Defaulter[T]) Default(_ context.Context, obj T) error {
	if obj.GetDeletionTimestamp().IsZero() && !infrav1.ExternallyManaged(obj) {
		controllerutil.AddFinalizer(obj, infrav1.Finalizer)
	}
	DefaultTerraformSpec(obj.GetTerraformSpec())
	return nil
}

// DefaultTerraformSpec fills the defaults the schema cannot express. The schema defaults
// spec.job.lockTimeoutSeconds to 300 whatever the deadline, so a spec that only shortens
// activeDeadlineSeconds to 300 or less would be refused for a value its author never wrote.
// A lock timeout equal to that default and not below the deadline becomes half the deadline.
// (The API server applies schema defaults before this webhook runs, so an explicit 300 cannot
// be told from the default; it is treated the same way.) It is idempotent.
func DefaultTerraformSpec(s *infrav1.TerraformSpec) {
	deadline := s.Job.EffectiveActiveDeadlineSeconds()
	lock := s.Job.EffectiveLockTimeoutSeconds()
	if lock == infrav1.DefaultLockTimeoutSeconds && lock >= deadline {
		half := deadline / 2
		s.Job.LockTimeoutSeconds = &half
	}
}

// Validator is the spec validation of a reconciled kind (CREATE and UPDATE).
type Validator[T Reconciled] struct {
	// Kind names the kind in errors.
	Kind string
	// Accounts reads the ServiceAccount that spec.job.serviceAccountName names (the API
	// server, not a cache). Nil skips that check; the controller makes it again before every
	// Job.
	Accounts client.Reader
	// Audiences asks the API server whether it accepts the audience of
	// spec.job.identityToken (jobs.CheckIdentityAudience). Nil skips that check; the
	// controller makes it again before every Job.
	Audiences jobs.AudienceProber
	// Secrets reads the Secrets the spec hands to module code (the API server, not a cache),
	// to refuse a ServiceAccount token or a Secret without the opt-in label
	// (modulesecrets.Check). Nil skips that check; the controller makes it again before every
	// Job.
	Secrets client.Reader
}

var _ admission.Validator[*infrav1.TerraformCluster] = Validator[*infrav1.TerraformCluster]{}

var serviceAccountPath = field.NewPath("spec", "job", "serviceAccountName")

// ValidateCreate implements admission.Validator.
func (v Validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	errs := ValidateTerraformSpec(field.NewPath("spec"), obj.GetTerraformSpec())
	errs = append(errs, ValidateTargetOperation(nil, obj.GetAnnotations())...)
	errs = append(errs, ValidateExternallyManaged(nil, obj)...)
	warnings, accountErrs := v.checkAccount(ctx, obj.GetNamespace(), obj.GetTerraformSpec().Job.ServiceAccountName)
	audienceWarnings, audienceErrs := checkAudience(ctx, v.Audiences, field.NewPath("spec"), obj.GetTerraformSpec())
	secretWarnings, secretErrs := checkModuleSecrets(ctx, v.Secrets, obj.GetNamespace(), field.NewPath("spec"), obj.GetTerraformSpec())
	identityWarnings, identityErrs := checkIdentityRef(ctx, v.Accounts, obj.GetNamespace(), field.NewPath("spec"), obj.GetTerraformSpec())
	errs = append(append(append(append(errs, accountErrs...), audienceErrs...), secretErrs...), identityErrs...)
	return append(append(append(warnings, audienceWarnings...), secretWarnings...), identityWarnings...), invalid(v.Kind, obj.GetName(), errs)
}

// ValidateUpdate implements admission.Validator. The update of a deleting object is never
// refused for its spec: its finalizer must stay removable.
func (v Validator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if !oldObj.GetDeletionTimestamp().IsZero() || !newObj.GetDeletionTimestamp().IsZero() {
		return nil, nil
	}
	path := field.NewPath("spec")
	errs := ValidateTerraformSpec(path, newObj.GetTerraformSpec())
	errs = append(errs, ValidateTerraformSpecUpdate(path, oldObj.GetTerraformSpec(), newObj.GetTerraformSpec(),
		Provisioned(oldObj.GetAnnotations(), oldObj.GetTerraformStatus()))...)
	errs = append(errs, ValidateTargetOperation(oldObj.GetAnnotations(), newObj.GetAnnotations())...)
	errs = append(errs, ValidateExternallyManaged(oldObj.GetAnnotations(), newObj)...)
	var warnings admission.Warnings
	if name := newObj.GetTerraformSpec().Job.ServiceAccountName; name != oldObj.GetTerraformSpec().Job.ServiceAccountName {
		var accountErrs field.ErrorList
		warnings, accountErrs = v.checkAccount(ctx, newObj.GetNamespace(), name)
		errs = append(errs, accountErrs...)
	}
	if audienceChanged(oldObj.GetTerraformSpec(), newObj.GetTerraformSpec()) {
		audienceWarnings, audienceErrs := checkAudience(ctx, v.Audiences, path, newObj.GetTerraformSpec())
		warnings, errs = append(warnings, audienceWarnings...), append(errs, audienceErrs...)
	}
	if moduleSecretRefsChanged(oldObj.GetTerraformSpec(), newObj.GetTerraformSpec()) {
		secretWarnings, secretErrs := checkModuleSecrets(ctx, v.Secrets, newObj.GetNamespace(), path, newObj.GetTerraformSpec())
		warnings, errs = append(warnings, secretWarnings...), append(errs, secretErrs...)
	}
	if identityRefChanged(oldObj.GetTerraformSpec(), newObj.GetTerraformSpec()) {
		identityWarnings, identityErrs := checkIdentityRef(ctx, v.Accounts, newObj.GetNamespace(), path, newObj.GetTerraformSpec())
		warnings, errs = append(warnings, identityWarnings...), append(errs, identityErrs...)
	}
	return warnings, invalid(v.Kind, newObj.GetName(), errs)
}

// checkAccount judges the ServiceAccount spec.job.serviceAccountName names, with the rule the
// controller applies before every Job (jobs.CheckRunnerAccount): an account that exists
// without the opt-in label is refused; a missing one, or one that cannot be read, is only a
// warning, so an account applied after the object in the same change still works (the object
// waits with InputsValid=False until it exists and opted in).
func (v Validator[T]) checkAccount(ctx context.Context, namespace, name string) (admission.Warnings, field.ErrorList) {
	if name == "" || v.Accounts == nil {
		return nil, nil
	}
	reason, msg, err := jobs.CheckRunnerAccount(ctx, v.Accounts, namespace, name)
	switch {
	case err != nil:
		return admission.Warnings{"CAPTF could not check the ServiceAccount " + name + " (" + err.Error() +
			"); the controller checks it again before every Job"}, nil
	case reason == infrav1.RunnerAccountNotOptedInReason:
		return nil, field.ErrorList{field.Forbidden(serviceAccountPath, msg)}
	case reason != "":
		return admission.Warnings{msg + "; until then the object runs no Job (InputsValid=False, " + reason + ")"}, nil
	}
	return nil, nil
}

// ValidateDelete implements admission.Validator; deletions are not validated.
func (Validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) { return nil, nil }

// TemplateValidator is the spec validation of a template kind: the stamped spec must pass the
// same checks as the object's. It checks no immutability: spec.template.spec is immutable, but
// the template-immutability ValidatingAdmissionPolicy (config/policy) enforces that in the API
// server, with Cluster API's topology dry runs let through.
type TemplateValidator[T client.Object] struct {
	// Kind names the kind in errors.
	Kind string
	// Spec returns the stamped object's shared spec.
	Spec func(T) *infrav1.TerraformSpec
	// Audiences judges spec.job.identityToken's audience as Validator.Audiences does; nil
	// skips that check (the stamped objects are checked on their own creation).
	Audiences jobs.AudienceProber
	// Secrets judges the Secrets the template's spec hands to module code, in the template's
	// namespace, as Validator.Secrets does; nil skips that check (the stamped objects are
	// checked on their own creation, and the controller before every Job).
	Secrets client.Reader
	// Annotations returns spec.template.metadata.annotations, what the template stamps onto
	// the objects Cluster API creates (ValidateTemplateMetadata).
	Annotations func(T) map[string]string
	// Contract returns the contract fields the template would stamp (spec.template.spec's
	// providerID and providerIDList; nil for a kind without them): the controller fills them on
	// each object, so a template may not (ValidateTemplateContract).
	Contract func(T) (providerID string, providerIDList []string)
	// Identities reads the TerraformIdentity spec.job.identityRef names and the template's
	// Namespace (the API server, not a cache), to judge the template like the objects it stamps
	// (checkIdentityRef). Nil skips that check.
	Identities client.Reader
}

var _ admission.Validator[*infrav1.TerraformClusterTemplate] = TemplateValidator[*infrav1.TerraformClusterTemplate]{}

var (
	templateSpecPath        = field.NewPath("spec", "template", "spec")
	templateAnnotationsPath = field.NewPath("spec", "template", "metadata", "annotations")
)

// ValidateCreate implements admission.Validator.
func (v TemplateValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	warnings, audienceErrs := checkAudience(ctx, v.Audiences, templateSpecPath, v.Spec(obj))
	secretWarnings, secretErrs := checkModuleSecrets(ctx, v.Secrets, obj.GetNamespace(), templateSpecPath, v.Spec(obj))
	errs := append(append(ValidateTerraformSpec(templateSpecPath, v.Spec(obj)), audienceErrs...), secretErrs...)
	identityWarnings, identityErrs := checkIdentityRef(ctx, v.Identities, obj.GetNamespace(), templateSpecPath, v.Spec(obj))
	errs = append(append(errs, identityErrs...), v.metadataErrs(obj)...)
	return append(append(warnings, secretWarnings...), identityWarnings...), invalid(v.Kind, obj.GetName(), errs)
}

// metadataErrs judges what the template stamps onto the objects' metadata, and the contract
// fields it would stamp onto their spec.
func (v TemplateValidator[T]) metadataErrs(obj T) field.ErrorList {
	var errs field.ErrorList
	if v.Annotations != nil {
		errs = ValidateTemplateMetadata(templateAnnotationsPath, v.Annotations(obj))
	}
	if v.Contract != nil {
		id, list := v.Contract(obj)
		errs = append(errs, ValidateTemplateContract(templateSpecPath, id, list)...)
	}
	return errs
}

// ValidateUpdate implements admission.Validator.
func (v TemplateValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if !newObj.GetDeletionTimestamp().IsZero() {
		return nil, nil
	}
	errs := ValidateTerraformSpec(templateSpecPath, v.Spec(newObj))
	var warnings admission.Warnings
	if audienceChanged(v.Spec(oldObj), v.Spec(newObj)) {
		var audienceErrs field.ErrorList
		warnings, audienceErrs = checkAudience(ctx, v.Audiences, templateSpecPath, v.Spec(newObj))
		errs = append(errs, audienceErrs...)
	}
	if moduleSecretRefsChanged(v.Spec(oldObj), v.Spec(newObj)) {
		secretWarnings, secretErrs := checkModuleSecrets(ctx, v.Secrets, newObj.GetNamespace(), templateSpecPath, v.Spec(newObj))
		warnings, errs = append(warnings, secretWarnings...), append(errs, secretErrs...)
	}
	if identityRefChanged(v.Spec(oldObj), v.Spec(newObj)) {
		identityWarnings, identityErrs := checkIdentityRef(ctx, v.Identities, newObj.GetNamespace(), templateSpecPath, v.Spec(newObj))
		warnings, errs = append(warnings, identityWarnings...), append(errs, identityErrs...)
	}
	errs = append(errs, v.metadataErrs(newObj)...)
	return warnings, invalid(v.Kind, newObj.GetName(), errs)
}

// ValidateDelete implements admission.Validator; deletions are not validated.
func (TemplateValidator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: kind}, name, errs)
}
