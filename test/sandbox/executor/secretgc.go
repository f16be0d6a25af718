package executor

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// secretCollector plays the garbage collector for CAPTF's own Secrets: when a CAPTF object
// is gone, the Secrets its controller owner reference names (durable inputs, outputs, state
// backups) are deleted in the background, as a real garbage collector would. A Secret still
// carrying a finalizer (the state protection) waits for it, as it would in a cluster. The
// state Secret has no owner reference and is never collected.
type secretCollector struct{ e *Executor }

func (e *Executor) setupSecretCollector(mgr manager.Manager) error {
	skip := true
	onDelete := builder.WithPredicates(predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("sandbox-secret-gc").WithOptions(controllerOptions(&skip))
	for i, o := range []client.Object{&infrav1.TerraformCluster{}, &infrav1.TerraformMachine{}, &infrav1.TerraformMachinePool{}} {
		if i == 0 {
			b = b.For(o, onDelete)
			continue
		}
		b = b.Watches(o, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		}), onDelete)
	}
	if err := b.Complete(&secretCollector{e: e}); err != nil {
		return fmt.Errorf("set up sandbox secret collector: %w", err)
	}
	return nil
}

// Reconcile deletes the managed Secrets of the namespace whose controller owner no longer
// exists (a Get by the owner's name, kind and UID).
func (r *secretCollector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var secrets metav1.PartialObjectMetadataList
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.e.apiReader.List(ctx, &secrets, client.InNamespace(req.Namespace), client.MatchingLabels{infrav1.ManagedLabel: "true"}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list managed secrets: %w", err)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		ref := metav1.GetControllerOf(s)
		if ref == nil || s.DeletionTimestamp != nil {
			continue
		}
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(infrav1.GroupVersion.WithKind(ref.Kind))
		err := r.e.apiReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, owner)
		switch {
		case err == nil && owner.UID == ref.UID:
			continue
		case err != nil && !apierrors.IsNotFound(err):
			if !isCAPTFKind(ref.Kind) {
				continue
			}
			return ctrl.Result{}, fmt.Errorf("get owner %s %s: %w", ref.Kind, ref.Name, err)
		}
		if !isCAPTFKind(ref.Kind) {
			continue
		}
		target := &corev1.Secret{}
		target.Namespace, target.Name = s.Namespace, s.Name
		log.FromContext(ctx).V(1).Info("owner is gone; deleting the Secret (garbage collection)", "secret", s.Name)
		if err := r.e.client.Delete(ctx, target, client.Preconditions{UID: &s.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", s.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

func isCAPTFKind(kind string) bool {
	switch kind {
	case infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind:
		return true
	}
	return false
}
