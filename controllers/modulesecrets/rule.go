package modulesecrets

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Label, set to LabelValue, opts a Secret of the object's namespace in: only then may its data
// reach module code. It is infrav1.VariablesLabel, the label variablesFrom sources carry.
const (
	Label      = infrav1.VariablesLabel
	LabelValue = "true"
)

// TokenAnnotation names the ServiceAccount whose token the token controller writes into a
// Secret that carries it (corev1.ServiceAccountNameKey).
const TokenAnnotation = corev1.ServiceAccountNameKey

// Kind says which field hands a Secret to module code.
type Kind string

// The kinds of reference.
const (
	// Env is spec.job.env[].valueFrom.secretKeyRef.
	Env Kind = "env"
	// Volume is a Secret volume of spec.job.podTemplate.
	Volume Kind = "volume"
	// CLIConfigFile is spec.job.cliConfig.secretRef.
	CLIConfigFile Kind = "cliConfig"
	// Credential is spec.job.cliConfig.credentials[].secretKeyRef (a TF_TOKEN_* variable).
	Credential Kind = "credential"
	// Variables is spec.variablesFrom[].secretRef.
	Variables Kind = "variablesFrom"
	// Identity is a TerraformIdentity's spec.env[].secretKeyRef, in the manager's namespace.
	Identity Kind = "identity"
)

// Pod reports whether the Job's pod names the Secret of a reference of this kind (the others
// reach module code through values the engine copies: variables, identity values).
func (k Kind) Pod() bool {
	return k == Env || k == Volume || k == CLIConfigFile || k == Credential
}

// Ref is one reference that hands a Secret to module code.
type Ref struct {
	Kind Kind
	// Path is the field that names the Secret.
	Path *field.Path
	// Name of the Secret.
	Name string
	// Keys module code receives; nil means every key of the Secret.
	Keys []string
	// Optional: a missing Secret (or key) leaves the reference out instead of holding runs.
	Optional bool
}

// RequiresLabel reports whether the Secret of r must carry Label: every kind but Identity.
func (r Ref) RequiresLabel() bool { return r.Kind != Identity }

// Refs lists every Secret reference of spec (at path, spec or spec.template.spec) that hands a
// Secret of the object's namespace to module code, in a fixed order: variablesFrom, env,
// cliConfig file, credentials, pod template volumes.
func Refs(path *field.Path, spec *infrav1.TerraformSpec) []Ref {
	var refs []Ref
	for i, src := range spec.VariablesFrom {
		if src.SecretRef != nil {
			refs = append(refs, Ref{Kind: Variables, Path: path.Child("variablesFrom").Index(i).Child("secretRef", "name"),
				Name: src.SecretRef.Name, Optional: src.Optional})
		}
	}
	job := path.Child("job")
	for i, e := range spec.Job.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		refs = append(refs, Ref{Kind: Env, Path: job.Child("env").Index(i).Child("valueFrom", "secretKeyRef", "name"),
			Name: ref.Name, Keys: []string{ref.Key}, Optional: ref.Optional != nil && *ref.Optional})
	}
	if c := spec.Job.CLIConfig; c != nil {
		if r := c.SecretRef; r != nil {
			refs = append(refs, Ref{Kind: CLIConfigFile, Path: job.Child("cliConfig", "secretRef", "name"), Name: r.Name, Keys: []string{r.Key}})
		}
		for i, cred := range c.Credentials {
			refs = append(refs, Ref{Kind: Credential, Path: job.Child("cliConfig", "credentials").Index(i).Child("secretKeyRef", "name"),
				Name: cred.SecretKeyRef.Name, Keys: []string{cred.SecretKeyRef.Key}})
		}
	}
	if t := spec.Job.PodTemplate; t != nil {
		for i, v := range t.Volumes {
			if v.Secret == nil {
				continue
			}
			var keys []string
			if len(v.Secret.Items) > 0 {
				keys = make([]string, 0, len(v.Secret.Items))
				for _, it := range v.Secret.Items {
					keys = append(keys, it.Key)
				}
			}
			refs = append(refs, Ref{Kind: Volume, Path: job.Child("podTemplate", "volumes").Index(i).Child("secret", "name"),
				Name: v.Secret.Name, Keys: keys})
		}
	}
	return refs
}

// IdentityRefs lists the Secret references of a TerraformIdentity (Secrets of the manager's
// namespace).
func IdentityRefs(id *infrav1.TerraformIdentity) []Ref {
	refs := make([]Ref, 0, len(id.Spec.Env))
	for i, e := range id.Spec.Env {
		refs = append(refs, Ref{Kind: Identity, Path: field.NewPath("spec", "env").Index(i).Child("secretKeyRef", "name"),
			Name: e.SecretKeyRef.Name, Keys: []string{e.SecretKeyRef.Key}})
	}
	return refs
}

// IsToken reports whether s holds, or will hold once the token controller fills it, a
// Kubernetes ServiceAccount token: its type is kubernetes.io/service-account-token, or it
// carries TokenAnnotation.
func IsToken(s *corev1.Secret) bool {
	if s.Type == corev1.SecretTypeServiceAccountToken {
		return true
	}
	_, ok := s.Annotations[TokenAnnotation]
	return ok
}

// OptedIn reports whether s carries Label=LabelValue.
func OptedIn(s *corev1.Secret) bool {
	return s.Labels[Label] == LabelValue
}

// Judge is the rule for the Secret s that r names: never a ServiceAccount token (IsToken), and,
// when r.RequiresLabel, opted in (OptedIn). It returns the condition reason of the worst
// finding (infrav1.ModuleSecretRefusedReason for a token, VariablesSourceNotOptedInReason for a
// missing label) and the errors, each saying what to do; "" and nil when s may reach module
// code. It never reads a value.
func Judge(r Ref, s *corev1.Secret) (string, field.ErrorList) {
	if IsToken(s) {
		return infrav1.ModuleSecretRefusedReason, field.ErrorList{field.Forbidden(r.Path, fmt.Sprintf(
			"Secret %s/%s holds a Kubernetes ServiceAccount token (type %s, or the annotation %s): module code never holds a Kubernetes credential, "+
				"since it could read and write this object's state past the state channel; name a Secret of another type that holds only the provider's credential",
			s.Namespace, s.Name, corev1.SecretTypeServiceAccountToken, TokenAnnotation))}
	}
	if r.RequiresLabel() && !OptedIn(s) {
		overwrite := ""
		if _, ok := s.Labels[Label]; ok {
			overwrite = " --overwrite"
		}
		return infrav1.VariablesSourceNotOptedInReason, field.ErrorList{field.Forbidden(r.Path, fmt.Sprintf(
			"Secret %s/%s is not labelled %s=%s, so CAPTF does not hand it to module code: a Secret must opt in, so that an object cannot pass another workload's Secret to a module "+
				"(whose output its author reads); if it is meant for Terraform, run: kubectl label secret %s -n %s %s=%s%s",
			s.Namespace, s.Name, Label, LabelValue, s.Name, s.Namespace, Label, LabelValue, overwrite))}
	}
	return "", nil
}

// missingKeys are the keys of r that s does not hold.
func missingKeys(r Ref, s *corev1.Secret) []string {
	var out []string
	for _, k := range r.Keys {
		if _, ok := s.Data[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
