package engine

import (
	"context"
	"fmt"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The abandon rule (docs/deletion.md, "Abandon"). captf.io/abandon-infrastructure lets a
// deleting object go without a destroy. It applies only when it is meant now: on an object
// that is being deleted and was abandoned after its deletion began, or on one its state holds
// (StateLost, an unreadable state), deleting or not. Anywhere else it is dormant, and a later
// ordinary delete would silently skip the destroy: the admission webhook refuses setting it
// (webhooks.AbandonApplies), and the engine voids one that got past (the webhook down or
// not installed, or set before this rule): Decide sets Decision.VoidAbandon, act removes the
// annotation and emits the Warning event AbandonVoided.

// gatherAbandonOrder sets AbandonPredates for a deleting object that carries an abandon. The
// manager's cache strips managed fields, so it reads the object live (one read, only in this
// case). When the API server no longer shows the abandon the cache shows (or the object is
// gone), the abandon is not honoured this pass: every write of the pass carries the cached
// resourceVersion and conflicts, and the next pass decides on the newer object.
func (p *pass) gatherAbandonOrder(ctx context.Context) error {
	live := p.r.Kind.New()
	err := p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(p.obj), live)
	switch {
	case apierrors.IsNotFound(err):
		p.ev.Object.AbandonPredates = true
		return nil
	case err != nil:
		return fmt.Errorf("read the object live for when its abandon was set: %w", err)
	}
	key := infrav1.AbandonInfrastructureAnnotation
	if live.GetUID() != p.obj.GetUID() || live.GetAnnotations()[key] != p.obj.GetAnnotations()[key] {
		p.ev.Object.AbandonPredates = true
		return nil
	}
	p.ev.Object.AbandonPredates = decide.AbandonSetBefore(live)
	return nil
}
