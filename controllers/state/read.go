package state

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// StateKey is the data key of the backend's state Secret (runnerapi.StateKey).
const StateKey = runnerapi.StateKey

// MaxStateBytes bounds the uncompressed state CAPTF reads (runnerapi.MaxStateBytes).
const MaxStateBytes = runnerapi.MaxStateBytes

// Read reads the state of the object with this suffix from its backend Secret in namespace,
// through reader (pass the live API reader). It returns ErrNoState (wrapped) when there is no
// state, a *StateError when the Secret cannot be read as a state, or the API error wrapped.
func Read(ctx context.Context, reader client.Reader, namespace, suffix string) (*State, error) {
	name := naming.StateSecretName(suffix)
	log := logf.FromContext(ctx).WithValues("stateSecret", namespace+"/"+name)
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			log.V(1).Info("no state secret")
			return nil, fmt.Errorf("state secret %s/%s not found: %w", namespace, name, ErrNoState)
		}
		return nil, fmt.Errorf("read state secret %s/%s: %w", namespace, name, err)
	}
	st, err := FromSecret(&s)
	if err != nil {
		return nil, err
	}
	log.V(1).Info("read state", "serial", st.Serial, "outputs", len(st.Outputs), "resources", len(st.Resources))
	return st, nil
}

// FromSecret reads a state from the backend's Secret (see Read for the results).
func FromSecret(s *corev1.Secret) (*State, error) {
	where := s.Namespace + "/" + s.Name
	if len(s.Data) == 0 {
		return nil, fmt.Errorf("state secret %s has no data: %w", where, ErrNoState)
	}
	compressed, ok := s.Data[StateKey]
	if !ok || len(s.Data) != 1 {
		return nil, stateErr(where, ReasonStateLayoutUnknown, nil,
			"expected exactly the key %q, found the keys [%s]; this may be a chunked state written by a newer backend, which CAPTF does not read",
			StateKey, strings.Join(sortedKeys(s.Data), ", "))
	}
	raw, err := Decompress(compressed)
	if err != nil {
		return nil, inSecret(where, err)
	}
	st, err := Parse(raw)
	if err != nil {
		return nil, inSecret(where, err)
	}
	st.MarkedForDeletion = s.DeletionTimestamp != nil
	return st, nil
}

// inSecret names the Secret a *StateError was found in; other errors are returned as they are.
func inSecret(where string, err error) error {
	if se, ok := AsStateError(err); ok {
		se.Secret = where
		return se
	}
	return err
}

// Decompress decodes the backend's tfstate value (runnerapi.DecodeState), refusing more than
// MaxStateBytes.
func Decompress(compressed []byte) ([]byte, error) {
	raw, err := runnerapi.DecodeState(compressed)
	if de, ok := runnerapi.AsDecodeError(err); ok {
		switch {
		case de.NotGzip:
			return nil, stateErr("", ReasonStateCorrupt, de.Err, "the %s key is not gzip data", StateKey)
		case de.Damaged:
			return nil, stateErr("", ReasonStateCorrupt, de.Err, "the %s key is damaged gzip data", StateKey)
		default:
			return nil, stateErr("", ReasonStateTooLarge, nil, "the uncompressed state exceeds %d bytes", MaxStateBytes)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("decode state: %w", err)
	}
	return raw, nil
}

// Compress encodes state JSON the way the backend stores it in the tfstate key
// (runnerapi.EncodeState).
func Compress(stateJSON []byte) ([]byte, error) {
	gz, err := runnerapi.EncodeState(stateJSON)
	if err != nil {
		return nil, fmt.Errorf("compress state: %w", err)
	}
	return gz, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
