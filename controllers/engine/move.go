package engine

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// labelStateForMove puts clusterctl's move label on the object's Terraform state Secret.
//
// Terraform's kubernetes backend writes that Secret, not CAPTF, so it carries neither an owner
// reference nor the label, and `clusterctl move` would leave the state behind in the source
// cluster: the target would hold the object without its state (a later destroy would find
// nothing to destroy, an apply would create everything a second time). The backend keeps the
// labels of an existing Secret when it writes a new state, so labelling it once per
// successful apply is enough; the bookkeeping of a finished apply calls this before it counts
// the Job, so a failed write is retried by the next pass. A missing Secret is not an error
// (the outputs check reports it).
//
// The label is the only change: no owner reference, so deleting the object can never delete
// its state through the garbage collector (I6).
func (p *pass) labelStateForMove(ctx context.Context) error {
	name := naming.StateSecretName(p.suffix)
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read state secret %s: %w", name, err)
	}
	if _, ok := s.GetLabels()[inputs.MoveLabel]; ok {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{inputs.MoveLabel: ""}}})
	if err != nil {
		return fmt.Errorf("build move label patch: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.obj.GetNamespace(), Name: name}}
	if err := p.r.Client.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("label state secret %s for clusterctl move: %w", name, err)
	}
	return nil
}
