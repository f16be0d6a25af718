package engine

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
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
	// The state and the durable inputs lose their protection and go; the backups lose their
	// protection and stay until the object is gone (the garbage collector follows their owner
	// reference), so a mistaken destroy can still be undone from them meanwhile.
	ns := p.obj.GetNamespace()
	for _, name := range []string{naming.StateSecretName(p.suffix), naming.InputsSecretName(p.suffix)} {
		if err := p.letGoSecret(ctx, name, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, b := range p.ev.State.Backups {
		if err := p.letGoSecret(ctx, b.Name, false); err != nil {
			return ctrl.Result{}, err
		}
	}
	outputs := &corev1.Secret{}
	outputs.Namespace, outputs.Name = ns, naming.OutputsSecretName(p.suffix)
	if err := p.r.Client.Delete(ctx, outputs); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", outputs.Name, err)
	}
	if err := p.deleteInventory(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.deleteUnheldStateLock(ctx); err != nil {
		return ctrl.Result{}, err
	}
	res, err := p.removeFinalizer(ctx, true, "destroyed; state, inputs and leases deleted")
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	p.rep.Cleaned = true
	return res, nil
}

// deleteUnheldStateLock deletes the Terraform backend's lock Lease once the state is gone, but
// only when no terraform holds it (no holder), with UID and resourceVersion preconditions so a
// lock taken meanwhile stays. A held lock is left alone: it is terraform's, and only its owner
// or a force-unlock may release it.
func (p *pass) deleteUnheldStateLock(ctx context.Context) error {
	l := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.StateLockLeaseName(p.suffix)}
	if err := p.r.APIReader.Get(ctx, key, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read state lock %s: %w", key.Name, err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		log.FromContext(ctx).Info("the state lock is held; leaving it", "lease", key.Name, "holder", *l.Spec.HolderIdentity)
		return nil
	}
	pre := client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}
	if err := p.r.Client.Delete(ctx, l, pre); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete state lock %s: %w", key.Name, err)
	}
	return nil
}
