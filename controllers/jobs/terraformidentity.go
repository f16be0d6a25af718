package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// NamespaceAllowed reports whether allowed lets the objects of namespace (whose labels are
// nsLabels) use an identity, the way Cluster API providers read allowedNamespaces: nil allows
// no namespace, an empty object (no list, no selector) allows every namespace, otherwise the
// namespace must be in list or match a non-empty selector. A selector that does not parse
// allows nothing and says why.
func NamespaceAllowed(allowed *infrav1.AllowedNamespaces, namespace string, nsLabels map[string]string) (bool, error) {
	if allowed == nil {
		return false, nil
	}
	if len(allowed.List) == 0 && allowed.Selector == nil {
		return true, nil
	}
	if slices.Contains(allowed.List, namespace) {
		return true, nil
	}
	if allowed.Selector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(allowed.Selector)
	if err != nil {
		return false, fmt.Errorf("allowedNamespaces.selector: %w", err)
	}
	if sel.Empty() {
		return false, nil
	}
	return sel.Matches(labels.Set(nsLabels)), nil
}

// IdentityEnvRefusal says why the identity's variables cannot go into a Job of spec: a name
// CAPTF reserves (IsReservedEnv), or a name spec.job.env sets too (one of the two would
// silently win). "" when they can.
func IdentityEnvRefusal(id *infrav1.TerraformIdentity, spec *infrav1.TerraformSpec) string {
	own := map[string]bool{}
	for _, e := range spec.Job.Env {
		own[e.Name] = true
	}
	var reserved, clash []string
	for _, e := range id.Spec.Env {
		switch {
		case IsReservedEnv(e.Name):
			reserved = append(reserved, e.Name)
		case own[e.Name]:
			clash = append(clash, e.Name)
		}
	}
	var why []string
	if len(reserved) > 0 {
		why = append(why, fmt.Sprintf("it sets %s, which CAPTF reserves (%s); the platform team must rename them in its spec.env",
			strings.Join(reserved, ", "), strings.Join(ReservedEnv, ", ")))
	}
	if len(clash) > 0 {
		why = append(why, fmt.Sprintf("it sets %s, which spec.job.env sets too; remove them from spec.job.env", strings.Join(clash, ", ")))
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("TerraformIdentity %s cannot be used: %s", id.Name, strings.Join(why, "; "))
}

// CheckTerraformIdentity judges spec.job.identityRef of an object in namespace, reading the
// TerraformIdentity and the Namespace live through reader: the identity must exist, allow the
// namespace (NamespaceAllowed) and set no variable IdentityEnvRefusal refuses. It returns the
// identity when it may be used; otherwise a reason (infrav1.IdentityNotFoundReason,
// IdentityNotAllowedReason or IdentityInvalidReason) and a message that names the identity,
// the namespace and what to change. No reference: nil and no reason. err is a failed read.
func CheckTerraformIdentity(ctx context.Context, reader client.Reader, namespace string, spec *infrav1.TerraformSpec) (*infrav1.TerraformIdentity, string, string, error) {
	ref := spec.Job.IdentityRef
	if ref == nil {
		return nil, "", "", nil
	}
	id := &infrav1.TerraformIdentity{}
	switch err := reader.Get(ctx, types.NamespacedName{Name: ref.Name}, id); {
	case apierrors.IsNotFound(err):
		return nil, infrav1.IdentityNotFoundReason, fmt.Sprintf("spec.job.identityRef names TerraformIdentity %s, which does not exist; "+
			"the object runs no Job until the platform team creates it (allowing namespace %s) or spec.job.identityRef names another", ref.Name, namespace), nil
	case err != nil:
		return nil, "", "", fmt.Errorf("read terraform identity %s: %w", ref.Name, err)
	}
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return nil, "", "", fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	allowed, err := NamespaceAllowed(id.Spec.AllowedNamespaces, namespace, ns.Labels)
	if err != nil {
		return nil, infrav1.IdentityInvalidReason, fmt.Sprintf("TerraformIdentity %s cannot be used: its %v", id.Name, err), nil
	}
	if !allowed {
		return nil, infrav1.IdentityNotAllowedReason, notAllowedMessage(id, namespace), nil
	}
	if msg := IdentityEnvRefusal(id, spec); msg != "" {
		return nil, infrav1.IdentityInvalidReason, msg, nil
	}
	return id, "", "", nil
}

// notAllowedMessage says which identity refuses which namespace, and what would change that.
func notAllowedMessage(id *infrav1.TerraformIdentity, namespace string) string {
	var how string
	switch a := id.Spec.AllowedNamespaces; {
	case a == nil:
		how = "its spec.allowedNamespaces is unset, which allows no namespace"
	case a.Selector != nil && len(a.List) == 0:
		how = "its spec.allowedNamespaces.selector does not match the namespace's labels"
	case a.Selector != nil:
		how = fmt.Sprintf("its spec.allowedNamespaces.list does not name %s and its selector does not match the namespace's labels", namespace)
	default:
		how = fmt.Sprintf("its spec.allowedNamespaces.list does not name %s", namespace)
	}
	return fmt.Sprintf("TerraformIdentity %s does not allow namespace %s: %s; the platform team must allow the namespace "+
		"(spec.allowedNamespaces.list, or a label its selector matches), or spec.job.identityRef must name an identity that allows it",
		id.Name, namespace, how)
}

// ErrIdentitySecret marks a Secret or key of an identity that is missing in the manager's
// namespace: the platform's configuration, reported as IdentityInvalid.
var ErrIdentitySecret = errors.New("identity secret")

// IdentityValues reads the value of each of the identity's variables from its Secret in the
// manager's namespace (managerNamespace), live through reader. A Secret or key that is missing
// comes back wrapped in ErrIdentitySecret, naming the Secret and key, never a value; so does a
// Secret that is a ServiceAccount token (modulesecrets.Judge).
func IdentityValues(ctx context.Context, reader client.Reader, managerNamespace string, id *infrav1.TerraformIdentity) (map[string][]byte, error) {
	if managerNamespace == "" {
		return nil, fmt.Errorf("%w: the manager does not know its namespace (set $POD_NAMESPACE or --manager-service-account)", ErrIdentitySecret)
	}
	secrets := map[string]*corev1.Secret{}
	values := make(map[string][]byte, len(id.Spec.Env))
	for i, e := range id.Spec.Env {
		ref := e.SecretKeyRef
		s, ok := secrets[ref.Name]
		if !ok {
			s = &corev1.Secret{}
			switch err := reader.Get(ctx, types.NamespacedName{Namespace: managerNamespace, Name: ref.Name}, s); {
			case apierrors.IsNotFound(err):
				return nil, fmt.Errorf("%w: TerraformIdentity %s takes %s from Secret %s/%s, which does not exist", ErrIdentitySecret, id.Name, e.Name, managerNamespace, ref.Name)
			case err != nil:
				return nil, fmt.Errorf("read identity secret %s/%s: %w", managerNamespace, ref.Name, err)
			}
			// The manager's namespace is the platform's: no opt-in label there, but never a
			// ServiceAccount token (the manager's own, for one).
			if _, errs := modulesecrets.Judge(modulesecrets.IdentityRefs(id)[i], s); len(errs) > 0 {
				return nil, fmt.Errorf("%w: TerraformIdentity %s: %s", ErrIdentitySecret, id.Name, errs.ToAggregate().Error())
			}
			secrets[ref.Name] = s
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("%w: TerraformIdentity %s takes %s from key %s of Secret %s/%s, which has no such key", ErrIdentitySecret, id.Name, e.Name, ref.Key, managerNamespace, ref.Name)
		}
		values[e.Name] = v
	}
	return values, nil
}

// identityEnv are the main container's variables of the object's TerraformIdentity: each a
// reference to the key of its name in the Job's per-run identity Secret, so the Job and its pod
// carry no value.
func identityEnv(p Params, job string) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(p.IdentityEnv))
	for _, n := range p.IdentityEnv {
		env = append(env, corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: naming.RunIdentitySecretName(job)}, Key: n, Optional: ptr.To(false)}}})
	}
	return env
}

// annotateIdentity marks a Job built with identity variables with infrav1.IdentityRefAnnotation
// (the identity's name): the mark survives the manager's Job cache, which drops pod templates.
func annotateIdentity(p Params, annotations map[string]string) {
	if len(p.IdentityEnv) == 0 {
		return
	}
	name := ""
	if ref := p.Spec.Job.IdentityRef; ref != nil {
		name = ref.Name
	}
	annotations[infrav1.IdentityRefAnnotation] = name
}

// ReadsRunIdentitySecret reports whether a Job Build made reads a per-run identity Secret
// (naming.RunIdentitySecretName), by its infrav1.IdentityRefAnnotation, which a cached Job
// keeps.
func ReadsRunIdentitySecret(job *batchv1.Job) bool {
	_, ok := job.Annotations[infrav1.IdentityRefAnnotation]
	return ok
}

// checkIdentityEnv refuses identity variables that are reserved, set twice, or set by
// spec.job.env too.
func checkIdentityEnv(p Params) []error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range p.Spec.Job.Env {
		seen[e.Name] = true
	}
	for _, n := range p.IdentityEnv {
		switch {
		case IsReservedEnv(n):
			errs = append(errs, fmt.Errorf("the identity sets %s, which CAPTF reserves", n))
		case seen[n]:
			errs = append(errs, fmt.Errorf("the identity sets %s, which spec.job.env or the identity sets already", n))
		}
		seen[n] = true
	}
	return errs
}
