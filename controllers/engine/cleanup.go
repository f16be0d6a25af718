package engine

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
)

// cleanup runs after a successful destroy (or when no state was ever written): state Secret,
// durable inputs, outputs, inventory and every lease the object owns go, then the finalizer.
func (p *pass) cleanup(ctx context.Context) (ctrl.Result, error) {
	// Leases first: a live one means a Job of the object runs or may still be created, and
	// then nothing may be deleted yet.
	kept, err := p.r.Leases.Cleanup(ctx, p.owner)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("release leases: %w", err)
	}
	if len(kept) > 0 {
		log.FromContext(ctx).Info("a live lease holds the cleanup back", "leases", kept)
		p.rep.CleanupBlocked = fmt.Sprintf("waiting for the live lease(s) %v of this object to free before deleting its state", kept)
		return ctrl.Result{RequeueAfter: decide.LagRequeue}, nil
	}
	// I6: Decide let go only of an empty or absent state (Evidence.State.Empty, read this pass).
	if err := p.r.stateKeeper().Clean(ctx, p.subject, p.ev.State.Backups); err != nil {
		return ctrl.Result{}, err
	}
	res, err := p.removeFinalizer(ctx, true, "destroyed; state, inputs and leases deleted")
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	p.rep.Cleaned = true
	return res, nil
}
