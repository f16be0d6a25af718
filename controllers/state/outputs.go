package state

import (
	"encoding/json"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// MoveLabel makes `clusterctl move` move a Secret along with the cluster (infrav1.MoveLabel).
const MoveLabel = infrav1.MoveLabel

// maxSecretBytes is what the API server lets a Secret's data hold.
const maxSecretBytes = 1 << 20

// secretKeyPattern is what the API server accepts as a Secret data key.
var secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// ClusterOutputsForMachines returns what a TerraformCluster module offers its machines and
// pools as var.captf.cluster_outputs: every output that is not sensitive, as compact JSON.
// Sensitive outputs are left out, because the machine's inputs are hashed into annotations and
// logged by name; a machine module that needs a secret from the cluster module reads the
// cluster's outputs Secret through variablesFrom instead. A nil state gives an empty map.
func ClusterOutputsForMachines(s *State) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if s == nil {
		return out
	}
	for name, o := range s.Outputs {
		if v, err := o.Value(); err == nil {
			out[name] = v
		}
	}
	return out
}

// OutputsSecret builds the Secret that offers all of an object's module outputs to users
// (naming.OutputsSecretName(suffix)): one key per output holding its value as JSON, sensitive
// outputs included (it is a Secret). It is owned by the object and labelled for `clusterctl
// move`; gvk is the owner's kind and the cluster label comes from the owner's cluster-name label.
// A nil state gives a Secret with no keys.
func OutputsSecret(owner metav1.Object, gvk schema.GroupVersionKind, suffix string, s *State) (*corev1.Secret, error) {
	if err := checkOwner("outputs secret", owner, gvk, suffix); err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	size := 0
	if s != nil {
		for name, o := range s.Outputs {
			if !secretKeyPattern.MatchString(name) || len(name) > 253 {
				return nil, invalid(name, "the name cannot be a Secret key")
			}
			data[name] = o.value
			size += len(name) + len(o.value)
		}
	}
	if size > maxSecretBytes {
		return nil, &OutputError{Reason: infrav1.OutputInvalidReason,
			Message: fmt.Sprintf("the module's outputs take %d bytes, over the %d bytes a Secret can hold; output less data", size, maxSecretBytes)}
	}
	// Offered to other objects' variablesFrom (a machine module reading its cluster's outputs).
	return movedSecret(owner, gvk, naming.OutputsSecretName(suffix), infrav1.VariablesLabel, "true", data), nil
}

// checkOwner refuses to build one of an object's Secrets (what) for an owner without a name,
// namespace, UID or kind, or without a state suffix.
func checkOwner(what string, owner metav1.Object, gvk schema.GroupVersionKind, suffix string) error {
	if owner.GetUID() == "" || owner.GetName() == "" || owner.GetNamespace() == "" || gvk.Kind == "" {
		return fmt.Errorf("%s: the owner needs a name, namespace, uid and kind", what)
	}
	if suffix == "" {
		return fmt.Errorf("%s: suffix is empty", what)
	}
	return nil
}

// movedSecret is an opaque Secret of the object's that clusterctl move carries with it:
// controlled by the owner (gvk is its kind), with the owner labels (the cluster from the
// owner's cluster-name label, the shard), the move label, and label = value.
func movedSecret(owner metav1.Object, gvk schema.GroupVersionKind, name, label, value string, data map[string][]byte) *corev1.Secret {
	labels := naming.OwnerLabels(gvk.Kind, owner.GetName(), owner.GetLabels()[infrav1.ClusterNameLabel], naming.ShardOf(owner))
	labels[MoveLabel] = ""
	labels[label] = value
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       owner.GetNamespace(),
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}
