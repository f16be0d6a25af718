package modulesecrets

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Result is what Check found.
type Result struct {
	// Secrets are the Secrets read that pass the rule, by name. Only these may be copied.
	Secrets map[string]*corev1.Secret
	// Missing are the references whose Secret does not exist, or lacks a key, and that are not
	// optional: admission warns about them, the engine holds the object.
	Missing []Ref
	// Reason is the condition reason of the worst refusal ("" when none): a token
	// (infrav1.ModuleSecretRefusedReason) before a missing label (VariablesSourceNotOptedIn).
	Reason string
	// Errs are the refusals, each naming the field and what to do.
	Errs field.ErrorList
}

// MissingMessage says which Secrets or keys are missing, and what to do; "" when none.
func (r Result) MissingMessage(namespace string) string {
	if len(r.Missing) == 0 {
		return ""
	}
	parts := make([]string, 0, len(r.Missing))
	for _, m := range r.Missing {
		parts = append(parts, fmt.Sprintf("%s names Secret %s/%s", m.Path, namespace, m.Name))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf(": it does not exist or lacks the key named; create it with the key, labelled %s=%s, "+
		"or remove the reference (no Job starts until then)", Label, LabelValue)
}

// Check reads, through reader (the API server, not a cache), each Secret refs name in
// namespace, once, and judges that read (Judge). A Secret that does not exist, or lacks a key
// a non-optional reference names, is Missing unless the reference is optional. err is a
// failed read other than NotFound.
func Check(ctx context.Context, reader client.Reader, namespace string, refs []Ref) (Result, error) {
	res := Result{Secrets: map[string]*corev1.Secret{}}
	read := map[string]*corev1.Secret{}
	absent := map[string]bool{}
	for _, r := range refs {
		s, seen := read[r.Name]
		if !seen && !absent[r.Name] {
			s = &corev1.Secret{}
			switch err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.Name}, s); {
			case apierrors.IsNotFound(err):
				absent[r.Name], s = true, nil
			case err != nil:
				return Result{}, fmt.Errorf("read secret %s/%s named by %s: %w", namespace, r.Name, r.Path, err)
			default:
				read[r.Name] = s
			}
		}
		if s == nil {
			if !r.Optional {
				res.Missing = append(res.Missing, r)
			}
			continue
		}
		reason, errs := Judge(r, s)
		if len(errs) > 0 {
			res.Errs = append(res.Errs, errs...)
			if res.Reason != infrav1.ModuleSecretRefusedReason {
				res.Reason = reason
			}
			continue
		}
		if len(missingKeys(r, s)) > 0 && !r.Optional {
			res.Missing = append(res.Missing, r)
		}
	}
	for name, s := range read {
		if !slices.ContainsFunc(refs, func(r Ref) bool { return r.Name == name && refused(res.Errs, r) }) {
			res.Secrets[name] = s
		}
	}
	return res, nil
}

// refused reports whether errs refuse r's field.
func refused(errs field.ErrorList, r Ref) bool {
	return slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == r.Path.String() })
}
