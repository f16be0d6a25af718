package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// writeInventory lists the resource instances of the state an apply left in the object's
// inventory Secret (naming.InventorySecretName, docs/state.md "The inventory"). It runs only
// in the bookkeeping of a successful apply, never on an idle pass, and writeSecret updates the
// Secret only when its content differs from what is there.
func (p *pass) writeInventory(ctx context.Context, st *state.State) error {
	gvk, err := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := state.InventorySecret(p.obj, gvk, p.suffix, state.InventoryOf(st))
	if err != nil {
		return fmt.Errorf("build inventory secret: %w", err)
	}
	if err := p.writeSecret(ctx, want); err != nil {
		return fmt.Errorf("write inventory secret: %w", err)
	}
	return nil
}

// deleteInventory deletes the inventory Secret in the cleanup after a destroy.
func (p *pass) deleteInventory(ctx context.Context) error {
	s := &corev1.Secret{}
	s.Namespace, s.Name = p.obj.GetNamespace(), naming.InventorySecretName(p.suffix)
	if err := p.r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", s.Name, err)
	}
	return nil
}
