package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
)

// The abandon rule (docs/deletion.md, "Abandon") is pure and lives in controllers/decide
// (abandon.go): Decide sets Decision.VoidAbandon, act removes the annotation and emits the
// Warning event AbandonVoided. This file reads the one thing the rule needs live: whether the
// abandon was set before the deletion began.

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
