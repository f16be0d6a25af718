package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// cleanup runs after a successful destroy (or when no state was ever written): state Secret,
// durable inputs, outputs and every lease the object owns go, then the finalizer.
func (p *pass) cleanup(ctx context.Context) (ctrl.Result, error) {
	// Leases first: a live one means a Job of the object runs or may still be created, and
	// then nothing may be deleted yet.
	kept, err := p.r.Leases.Cleanup(ctx, p.owner)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("release leases: %w", err)
	}
	if len(kept) > 0 {
		log.FromContext(ctx).Info("a live lease holds the cleanup back", "leases", kept)
		p.rep.cleanupBlocked = fmt.Sprintf("waiting for the live lease(s) %v of this object to free before deleting its state", kept)
		return ctrl.Result{RequeueAfter: LagRequeue}, nil
	}
	// I6: the state goes only when the destroy left nothing behind.
	st, err := state.Read(ctx, p.r.APIReader, p.obj.GetNamespace(), p.suffix)
	switch {
	case errors.Is(err, state.ErrNoState):
	case err != nil:
		if _, ok := state.AsStateError(err); !ok {
			return ctrl.Result{}, fmt.Errorf("read state before cleanup: %w", err)
		}
		p.rep.cleanupBlocked = "the state cannot be read, so it is kept: " + err.Error()
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case !state.StateEmpty(st):
		msg := "the destroy succeeded but the state still lists resources; the state is kept. Inspect it, then remove the annotation " +
			infrav1.DestroyedAnnotation + " to destroy again"
		p.rep.cleanupBlocked = msg
		p.emit(corev1.EventTypeWarning, "StateNotEmpty", msg)
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	ns := p.obj.GetNamespace()
	for _, name := range []string{naming.StateSecretName(p.suffix), naming.InputsSecretName(p.suffix), naming.OutputsSecretName(p.suffix)} {
		s := &corev1.Secret{}
		s.Namespace, s.Name = ns, name
		if err := p.r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", name, err)
		}
	}
	if err := p.deleteUnheldStateLock(ctx); err != nil {
		return ctrl.Result{}, err
	}
	res, err := p.removeFinalizer(ctx, true, "destroyed; state, inputs and leases deleted")
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	p.rep.cleaned = true
	if p.r.ManageRunnerRBAC {
		if err := p.removeRunnerRBACIfLast(ctx); err != nil {
			log.FromContext(ctx).Error(err, "remove the runner's account; it is recreated or removed by the next cleanup")
		}
	}
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

// removeRunnerRBACIfLast removes the runner's ServiceAccount, Role and RoleBinding when this
// object was the namespace's last CAPTF object (read from the cache). A Job of this object has
// ended by now; an object created meanwhile recreates them before its first Job.
func (p *pass) removeRunnerRBACIfLast(ctx context.Context) error {
	ns := p.obj.GetNamespace()
	lists := []client.ObjectList{&infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}}
	for _, l := range lists {
		if err := p.r.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list remaining objects: %w", err)
		}
		other := false
		if err := meta.EachListItem(l, func(it runtime.Object) error {
			if o, ok := it.(client.Object); ok && o.GetUID() != p.obj.GetUID() {
				other = true
			}
			return nil
		}); err != nil {
			return fmt.Errorf("list remaining objects: %w", err)
		}
		if other {
			return nil
		}
	}
	return RemoveRunnerRBAC(ctx, p.r.Client, ns, p.r.Jobs.ServiceAccountName)
}
