package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformmachines;terraformmachinepools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/status;terraformmachines/status;terraformmachinepools/status,verbs=patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinepools,verbs=list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;delete

// SetupWithManager registers the controller of r.Kind with its watches: the object itself, its
// Jobs (owner references), its Cluster (pause, deletion), and the kind's own dependencies.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.Kind.Name()).
		For(r.Kind.New()).
		Owns(&batchv1.Job{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.SameCluster)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	for _, w := range r.Kind.Watches() {
		m := w.Map
		if m == nil {
			m = r.SameCluster
		}
		b = b.Watches(w.Object, handler.EnqueueRequestsFromMapFunc(m))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("build %s controller: %w", r.Kind.Name(), err)
	}
	return nil
}

// SameCluster maps a Cluster, or any object carrying the cluster-name label, to every object
// of r's kind in that Cluster (read from the cache).
func (r *Reconciler) SameCluster(ctx context.Context, o client.Object) []reconcile.Request {
	cluster := o.GetLabels()[clusterv1.ClusterNameLabel]
	if _, isCluster := o.(*clusterv1.Cluster); isCluster {
		cluster = o.GetName()
	}
	if cluster == "" {
		return nil
	}
	list := r.Kind.NewList()
	if err := ListOwned(ctx, r.Client, list, o.GetNamespace(), cluster); err != nil {
		log.FromContext(ctx).Error(err, "map event to objects of the same cluster", "cluster", cluster)
		return nil
	}
	var out []reconcile.Request
	if err := meta.EachListItem(list, func(item runtime.Object) error {
		if obj, ok := item.(client.Object); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
		}
		return nil
	}); err != nil {
		log.FromContext(ctx).Error(err, "map event to objects of the same cluster", "cluster", cluster)
		return nil
	}
	return out
}
