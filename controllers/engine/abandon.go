package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
)

// The abandon rule (docs/deletion.md, "Abandon") is pure and lives in controllers/decide
// (abandon.go): Decide sets Decision.VoidAbandon, act removes the annotation and emits the
// Warning event AbandonVoided. This file reads the one thing the rule needs live: whether the
// abandon was set before the deletion began.

// gatherAbandonOrder reads a deleting object that carries an abandon live, for
// decide.AbandonPredates: the manager's cache strips managed fields, so this is one read, only
// in this case.
func gatherAbandonOrder(ctx context.Context, live client.Reader, cached, fresh Object) (bool, error) {
	err := live.Get(ctx, client.ObjectKeyFromObject(cached), fresh)
	switch {
	case apierrors.IsNotFound(err):
		return decide.AbandonPredates(cached, nil), nil
	case err != nil:
		return false, fmt.Errorf("read the object live for when its abandon was set: %w", err)
	}
	return decide.AbandonPredates(cached, fresh), nil
}
