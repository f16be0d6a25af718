package inputs

import (
	"encoding/json"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Keys of the per-run Secret: the fixed contract between the controller and the runner, whose
// one source is runnerapi.
const (
	// VariablesKey holds the canonical variables (a Terraform .tfvars.json file). The durable
	// inputs Secret uses the same key.
	VariablesKey = runnerapi.KeyVariables
	// BackendKey holds BackendConfig as JSON.
	BackendKey = runnerapi.KeyBackend
	// RedactKey holds the values to mask as a JSON array of strings, longest first
	// (runnerapi.LongestFirst). The durable inputs Secret uses the same key, so a destroy masks
	// what the apply masked.
	RedactKey = runnerapi.KeyRedact
	// RestoreKey, present only for a restore, holds the state to push (uncompressed JSON).
	RestoreKey = runnerapi.KeyRestoreState
)

// Keys of the durable inputs Secret besides VariablesKey and RedactKey.
const (
	// HashKey holds Inputs.Hash.
	HashKey = "hash"
	// ModuleKey holds Inputs.Module, the module source the variables were hashed with. A
	// Secret an earlier manager wrote (a LegacyHashVersion hash) has none.
	ModuleKey = "module"
)

// MoveLabel makes `clusterctl move` move a Secret along with the cluster (infrav1.MoveLabel).
const MoveLabel = infrav1.MoveLabel

// BackendConfig is the content of BackendKey: where the runner's kubernetes backend keeps the
// state (the Secret naming.StateSecretName(SecretSuffix) in Namespace).
type BackendConfig = runnerapi.Backend

func backendJSON(namespace, suffix string) ([]byte, error) {
	b, err := json.Marshal(BackendConfig{Namespace: namespace, SecretSuffix: suffix})
	if err != nil {
		return nil, fmt.Errorf("encode backend config: %w", err)
	}
	return b, nil
}

func redactJSON(values []string) ([]byte, error) {
	if values == nil {
		values = []string{}
	}
	// Without HTML escaping: the runner masks each value exactly as it reads it back.
	return canonicalJSON(values)
}

func dataSize(data map[string][]byte) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

func runSecretData(in *Inputs, namespace, suffix string, restoreState []byte) (map[string][]byte, error) {
	backend, err := backendJSON(namespace, suffix)
	if err != nil {
		return nil, err
	}
	redact, err := redactJSON(in.Redact)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		VariablesKey: in.Variables,
		BackendKey:   backend,
		RedactKey:    redact,
	}
	if restoreState != nil {
		data[RestoreKey] = restoreState
	}
	return data, nil
}

func runSecretSize(in *Inputs, namespace, suffix string, restoreState []byte) (int, error) {
	data, err := runSecretData(in, namespace, suffix, restoreState)
	if err != nil {
		return 0, err
	}
	return dataSize(data), nil
}

func checkInputs(in *Inputs) error {
	if in == nil || len(in.Variables) == 0 || in.Hash == "" {
		return errors.New("inputs are empty; assemble them first")
	}
	return nil
}

// ownerLabels are the owner labels of a Secret of this object, plus the move label.
func ownerLabels(owner metav1.Object, kind string) map[string]string {
	l := naming.OwnerLabels(kind, owner.GetName(), owner.GetLabels()[infrav1.ClusterNameLabel], naming.ShardOf(owner))
	l[MoveLabel] = ""
	return l
}

// DurableSecret builds the object's durable inputs Secret (naming.InputsSecretName(suffix)):
// the engine writes it before it creates a Job, and a destroy reads it back (FromDurableSecret),
// so it destroys with the inputs of the last apply even if a source Secret is gone. It is owned
// by the object and labelled for `clusterctl move`, so it moves with the object. gvk is the
// owner's kind; the cluster label comes from the owner's cluster-name label.
func DurableSecret(owner metav1.Object, gvk schema.GroupVersionKind, suffix string, in *Inputs) (*corev1.Secret, error) {
	if err := checkInputs(in); err != nil {
		return nil, err
	}
	if owner.GetUID() == "" || owner.GetName() == "" || owner.GetNamespace() == "" || gvk.Kind == "" {
		return nil, errors.New("durable inputs secret: the owner needs a name, namespace, uid and kind")
	}
	if suffix == "" {
		return nil, errors.New("durable inputs secret: suffix is empty")
	}
	redact, err := redactJSON(in.Redact)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        naming.InputsSecretName(suffix),
			Namespace:   owner.GetNamespace(),
			Labels:      ownerLabels(owner, gvk.Kind),
			Annotations: map[string]string{infrav1.InputsHashAnnotation: in.Hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gvk.GroupVersion().String(),
				Kind:       gvk.Kind,
				Name:       owner.GetName(),
				UID:        owner.GetUID(),
				Controller: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			VariablesKey: in.Variables,
			ModuleKey:    in.Module,
			HashKey:      []byte(in.Hash),
			RedactKey:    redact,
		},
	}, nil
}

// FromDurableSecret reads Inputs back from a durable inputs Secret. It refuses a Secret whose
// variables do not match its hash (edited or corrupted), so a destroy never runs with inputs
// nobody assembled.
func FromDurableSecret(s *corev1.Secret) (*Inputs, error) {
	where := "durable inputs Secret " + s.Namespace + "/" + s.Name
	vars, ok := s.Data[VariablesKey]
	if !ok || len(vars) == 0 {
		return nil, invalidf("%s has no %s key", where, VariablesKey)
	}
	hash, module := string(s.Data[HashKey]), s.Data[ModuleKey]
	got := Hash(module, vars)
	if IsLegacyHash(hash) && len(module) == 0 {
		// Written by an earlier manager, which hashed the variables alone.
		got = LegacyHash(vars)
	}
	if got != hash {
		return nil, invalidf("%s: its variables and module do not match its hash (stored %q, computed %q); it was edited or corrupted", where, hash, got)
	}
	var redact []string
	if err := json.Unmarshal(s.Data[RedactKey], &redact); err != nil {
		return nil, invalidf("%s: %s is not a JSON array of strings: %v", where, RedactKey, err)
	}
	return &Inputs{Variables: vars, Module: module, Hash: hash, Redact: redact}, nil
}

// RunSecret builds the per-run Secret of job (naming.RunSecretName(job.Name)), owned by the Job
// so it goes away with it. Its keys are exactly VariablesKey, BackendKey, RedactKey and, only
// when restoreState is not nil, RestoreKey. namespace and suffix locate the state for the
// backend. It refuses an empty restore state and a Secret over MaxRunSecretBytes.
func RunSecret(job *batchv1.Job, namespace, suffix string, in *Inputs, restoreState []byte) (*corev1.Secret, error) {
	if err := checkInputs(in); err != nil {
		return nil, err
	}
	if job == nil || job.Name == "" || job.Namespace == "" || job.UID == "" {
		return nil, errors.New("run secret: the job needs a name, namespace and uid (create it first)")
	}
	if namespace == "" || suffix == "" {
		return nil, errors.New("run secret: the backend namespace and suffix are required")
	}
	if restoreState != nil && len(restoreState) == 0 {
		return nil, errors.New("run secret: the state to restore is empty; refusing to push an empty state")
	}
	data, err := runSecretData(in, namespace, suffix, restoreState)
	if err != nil {
		return nil, err
	}
	if size := dataSize(data); size > MaxRunSecretBytes {
		return nil, tooLarge(size, in, len(restoreState))
	}
	labels := map[string]string{}
	for _, k := range []string{infrav1.ManagedLabel, infrav1.OwnerKindLabel, infrav1.OwnerNameLabel, infrav1.ClusterNameLabel, infrav1.WatchFilterLabel} {
		if v, ok := job.Labels[k]; ok {
			labels[k] = v
		}
	}
	labels[infrav1.ManagedLabel] = "true"
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        naming.RunSecretName(job.Name),
			Namespace:   job.Namespace,
			Labels:      labels,
			Annotations: map[string]string{infrav1.InputsHashAnnotation: in.Hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: batchv1.SchemeGroupVersion.String(),
				Kind:       "Job",
				Name:       job.Name,
				UID:        job.UID,
				Controller: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, nil
}
