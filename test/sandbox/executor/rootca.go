package executor

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RootCAConfigMap is the ConfigMap kube-controller-manager publishes in every namespace with
// the API server's CA under RootCAKey; projected volumes read it to trust the API server.
const (
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
)

// rootCAPublisher plays kube-controller-manager's root CA publisher.
type rootCAPublisher struct {
	e  *Executor
	ca string
}

func (e *Executor) setupRootCAPublisher(mgr manager.Manager) error {
	ca := e.restCfg.CAData
	if len(ca) == 0 && e.restCfg.CAFile != "" {
		b, err := os.ReadFile(e.restCfg.CAFile)
		if err != nil {
			return fmt.Errorf("read api server ca: %w", err)
		}
		ca = b
	}
	if len(ca) == 0 {
		return fmt.Errorf("set up root ca publisher: the executor's config holds no CA")
	}
	skip := true
	r := &rootCAPublisher{e: e, ca: string(ca)}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox-root-ca").
		For(&corev1.Namespace{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetName() != RootCAConfigMap {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		})).
		WithOptions(controllerOptions(&skip)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up root ca publisher: %w", err)
	}
	return nil
}

// Reconcile keeps kube-root-ca.crt in a namespace holding the API server's CA.
func (r *rootCAPublisher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.e.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return ctrl.Result{}, nil
	}
	cm := &corev1.ConfigMap{}
	err := r.e.client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: RootCAConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: RootCAConfigMap,
				Annotations: map[string]string{"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
			Data: map[string]string{RootCAKey: r.ca},
		}
		if err := r.e.client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create %s in %s: %w", RootCAConfigMap, ns.Name, err)
		}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get %s in %s: %w", RootCAConfigMap, ns.Name, err)
	}
	if cm.Data[RootCAKey] == r.ca && len(cm.Data) == 1 && len(cm.BinaryData) == 0 {
		return ctrl.Result{}, nil
	}
	cm.Data, cm.BinaryData = map[string]string{RootCAKey: r.ca}, nil
	if err := r.e.client.Update(ctx, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("update %s in %s: %w", RootCAConfigMap, ns.Name, err))
	}
	return ctrl.Result{}, nil
}
