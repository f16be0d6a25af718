package inputs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// HashVersion prefixes every inputs hash. Change it whenever what is hashed or how it is encoded
// changes, so an old hash never equals a new one by accident. v2 hashes the module's source
// (spec.module) with the variables; v1 hashed the variables alone (LegacyHash).
const HashVersion = "v2"

// LegacyHashVersion prefixes the hashes of the scheme before HashVersion: the applied-hash
// annotations and durable inputs Secrets that an earlier manager wrote carry it.
const LegacyHashVersion = "v1"

// MaxRunSecretBytes is the most the per-run Secret may hold, counting every key and value: the
// API server refuses Secrets whose data exceed 1 MiB.
const MaxRunSecretBytes = 1 << 20

// Inputs are the assembled variables of one run.
type Inputs struct {
	// Variables is a canonical JSON object (keys sorted at every depth, no insignificant
	// whitespace): the content of variables.tfvars.json.
	Variables []byte
	// Module is the module's source (ModuleIdentity of spec.module): which module the variables
	// are for. It is hashed with them.
	Module []byte
	// Hash is HashVersion + "-" + the hex SHA-256 of the versioned module source and canonical
	// variables (Hash).
	Hash string
	// Redact lists every value that came from a Secret, and the bootstrap data, longest first,
	// so the runner can mask them. It never contains an empty string.
	Redact []string
}

// String never prints values. It has a value receiver so that printing Inputs or *Inputs never
// falls back to printing the fields.
func (in Inputs) String() string {
	return fmt.Sprintf("inputs{hash: %s, %d bytes, %d redacted values}", in.Hash, len(in.Variables), len(in.Redact))
}

// GoString never prints values either (for %#v).
func (in Inputs) GoString() string { return in.String() }

// Hash returns the versioned inputs hash of a module source (ModuleIdentity) and canonical
// variables: another module, another image or path, or another ConfigMap of the same variables
// is another hash, so it is applied (or planned) as any change of the variables is.
func Hash(module, canonical []byte) string {
	h := sha256.New()
	// The module's length first: no module and variables pair reads as another pair.
	fmt.Fprintf(h, "captf-inputs/%s\x00%d\x00", HashVersion, len(module))
	h.Write(module)
	h.Write(canonical)
	return HashVersion + "-" + hex.EncodeToString(h.Sum(nil))
}

// LegacyHash returns the hash an earlier manager (LegacyHashVersion) gave canonical variables:
// the variables alone, whatever the module. The engine compares it with an applied-hash
// annotation of that scheme, once, to take the object over without applying it again.
func LegacyHash(canonical []byte) string {
	h := sha256.New()
	h.Write([]byte("captf-inputs/" + LegacyHashVersion + "\x00"))
	h.Write(canonical)
	return LegacyHashVersion + "-" + hex.EncodeToString(h.Sum(nil))
}

// IsLegacyHash reports whether hash is of the scheme before HashVersion.
func IsLegacyHash(hash string) bool {
	return strings.HasPrefix(hash, LegacyHashVersion+"-")
}

// ModuleIdentity is what the inputs hash takes of spec.module: its source as written (image,
// ConfigMap name, path) in a fixed JSON encoding. It names the module, not its content: a
// ConfigMap edited in place or an image tag pushed again is the same module (as for a Pod);
// a new revision is a new ConfigMap or image reference.
func ModuleIdentity(m infrav1.ModuleSource) ([]byte, error) {
	b, err := canonicalJSON(m)
	if err != nil {
		return nil, fmt.Errorf("encode the module source: %w", err)
	}
	return b, nil
}

// Assemble reads the object's variable sources through reader, applies the precedence rules and
// adds the contract inputs as the "captf" variable. namespace is the object's namespace.
//
// A problem the object's owner must fix is returned as *InputsError; an API error is returned
// wrapped, for the caller to retry.
func Assemble(ctx context.Context, reader client.Reader, namespace string, spec *infrav1.TerraformSpec, contract ContractInputs) (*Inputs, error) {
	log := logf.FromContext(ctx).WithValues("namespace", namespace)
	if spec == nil {
		return nil, errors.New("assemble inputs: spec is nil")
	}
	vars := map[string]any{}
	redact := redactSet{}

	for i, src := range spec.VariablesFrom {
		values, isSecret, where, err := readSource(ctx, reader, namespace, i, src)
		if err != nil {
			return nil, err
		}
		if values == nil {
			log.V(1).Info("optional variables source is missing, skipped", "source", where)
			continue
		}
		keys := slices.Sorted(maps.Keys(values))
		for _, k := range keys {
			if err := ValidateVariableName(k, where); err != nil {
				return nil, err
			}
			raw := values[k]
			if !utf8.Valid(raw) {
				return nil, invalidf("%s key %q is not valid UTF-8; Terraform variables must be text", where, k)
			}
			v := parseValue(raw)
			vars[k] = v
			if isSecret {
				if err := redact.addSecretValue(string(raw), v); err != nil {
					return nil, err
				}
			}
		}
		log.V(1).Info("read variables source", "source", where, "keys", keys)
	}

	user, err := specVariables(spec)
	if err != nil {
		return nil, err
	}
	for k, v := range user {
		if err := ValidateVariableName(k, "spec.variables"); err != nil {
			return nil, err
		}
		vars[k] = v
	}

	captf, err := contract.object()
	if err != nil {
		return nil, err
	}
	vars[CaptfVariable] = captf
	redact.addString(contract.BootstrapData)

	canonical, err := canonicalJSON(vars)
	if err != nil {
		return nil, fmt.Errorf("assemble inputs: %w", err)
	}
	module, err := ModuleIdentity(spec.Module)
	if err != nil {
		return nil, fmt.Errorf("assemble inputs: %w", err)
	}
	in := &Inputs{Variables: canonical, Module: module, Hash: Hash(module, canonical), Redact: redact.list()}

	// The per-run Secret must fit. Its backend.json depends on the suffix, whose length is fixed.
	size, err := runSecretSize(in, namespace, fixedLengthSuffix, nil)
	if err != nil {
		return nil, err
	}
	if size > MaxRunSecretBytes {
		return nil, tooLarge(size, in, 0)
	}
	log.V(1).Info("assembled inputs", "hash", in.Hash, "bytes", len(canonical), "redacted", len(in.Redact))
	return in, nil
}

// fixedLengthSuffix stands in for a state suffix when sizing the per-run Secret.
var fixedLengthSuffix = strings.Repeat("0", naming.SuffixLength)

func tooLarge(size int, in *Inputs, restore int) *InputsError {
	msg := fmt.Sprintf("the inputs need %d bytes in the per-run Secret, over the limit of %d bytes (variables %d bytes, redact list of %d values",
		size, MaxRunSecretBytes, len(in.Variables), len(in.Redact))
	if restore > 0 {
		msg += fmt.Sprintf(", state to restore %d bytes", restore)
	}
	msg += "); pass large data by reference (a URL, an object store key) instead of as a variable"
	return &InputsError{Reason: infrav1.InputsTooLargeReason, Message: msg}
}

// readSource returns the keys of one variablesFrom entry, nil when an optional source is
// missing. A source that exists without the opt-in label (VariablesLabel) is refused, optional
// or not, and none of its data is returned.
func readSource(ctx context.Context, reader client.Reader, namespace string, i int, src infrav1.VariablesSource) (map[string][]byte, bool, string, error) {
	switch {
	case src.SecretRef != nil && src.ConfigMapRef == nil:
		where := fmt.Sprintf("variablesFrom[%d] (Secret %s/%s)", i, namespace, src.SecretRef.Name)
		var s corev1.Secret
		if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: src.SecretRef.Name}, &s); err != nil {
			return missingOr(err, src.Optional, where, true)
		}
		ref := modulesecrets.Ref{Kind: modulesecrets.Variables, Path: field.NewPath("spec", "variablesFrom").Index(i).Child("secretRef", "name"), Name: src.SecretRef.Name}
		// The one rule for a Secret that reaches module code, judged on the read whose data
		// becomes the variables: opted in, and never a ServiceAccount token.
		if reason, errs := modulesecrets.Judge(ref, &s); len(errs) > 0 {
			return nil, true, where, &InputsError{Reason: reason, Message: where + ": " + errs.ToAggregate().Error()}
		}
		if s.Data == nil {
			return map[string][]byte{}, true, where, nil
		}
		return s.Data, true, where, nil
	case src.ConfigMapRef != nil && src.SecretRef == nil:
		where := fmt.Sprintf("variablesFrom[%d] (ConfigMap %s/%s)", i, namespace, src.ConfigMapRef.Name)
		var cm corev1.ConfigMap
		if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: src.ConfigMapRef.Name}, &cm); err != nil {
			return missingOr(err, src.Optional, where, false)
		}
		if !optedIn(&cm) {
			return nil, false, where, notOptedIn(where, "ConfigMap", namespace, src.ConfigMapRef.Name, &cm)
		}
		values := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
		for k, v := range cm.Data {
			values[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			values[k] = v
		}
		return values, false, where, nil
	default:
		return nil, false, "", invalidf("variablesFrom[%d] must set exactly one of secretRef and configMapRef", i)
	}
}

func missingOr(err error, optional bool, where string, isSecret bool) (map[string][]byte, bool, string, error) {
	if apierrors.IsNotFound(err) {
		if optional {
			return nil, isSecret, where, nil
		}
		return nil, isSecret, where, &InputsError{
			Reason:  infrav1.InputsSourceMissingReason,
			Message: where + " does not exist; create it, or mark the entry optional",
		}
	}
	return nil, isSecret, where, fmt.Errorf("read %s: %w", where, err)
}

// parseValue turns a Secret or ConfigMap value into a variable: the JSON value when the text is
// one JSON document, else the text as a string.
func parseValue(raw []byte) any {
	if v, err := parseJSON(raw); err == nil {
		return v
	}
	return string(raw)
}

func specVariables(spec *infrav1.TerraformSpec) (map[string]any, error) {
	if spec.Variables == nil {
		return nil, nil
	}
	raw := spec.Variables.Raw
	if len(raw) == 0 && spec.Variables.Object != nil {
		b, err := json.Marshal(spec.Variables.Object)
		if err != nil {
			return nil, invalidf("spec.variables cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	if len(raw) == 0 {
		return nil, nil
	}
	v, err := parseJSON(raw)
	if err != nil {
		return nil, invalidf("spec.variables is not valid JSON: %v", err)
	}
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalidf("spec.variables must be a JSON object of variable names to values")
	}
	return obj, nil
}

// redactSet collects values to mask.
type redactSet map[string]struct{}

func (r redactSet) addString(s string) {
	if s == "" {
		return
	}
	r[s] = struct{}{}
	// The value as it appears inside a JSON string (tfvars.json, JSON logs) when that differs.
	if b, err := json.Marshal(s); err == nil {
		if esc := string(b[1 : len(b)-1]); esc != s {
			r[esc] = struct{}{}
		}
	}
}

// addSecretValue adds a Secret value: the raw text, and when it parsed as JSON, its canonical
// encoding and every string inside it, since Terraform may print any part on its own.
func (r redactSet) addSecretValue(raw string, parsed any) error {
	r.addString(raw)
	if _, isString := parsed.(string); isString && parsed == raw {
		return nil
	}
	c, err := canonicalJSON(parsed)
	if err != nil {
		return fmt.Errorf("encode secret value for redaction: %w", err)
	}
	r.addString(string(c))
	r.addLeaves(parsed)
	return nil
}

func (r redactSet) addLeaves(v any) {
	switch t := v.(type) {
	case string:
		r.addString(t)
	case json.Number:
		r.addString(t.String())
	case map[string]any:
		for _, e := range t {
			r.addLeaves(e)
		}
	case []any:
		for _, e := range t {
			r.addLeaves(e)
		}
	}
}

// list returns the values longest first (so a runner masking in order never leaves part of a
// longer secret behind), ties in lexical order.
func (r redactSet) list() []string { return runnerapi.LongestFirst(r) }
