package engine

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
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
// Jobs (owner references), its Cluster (pause, deletion), and the kind's dependencies.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	kind := r.Kind.Name()
	b := ctrl.NewControllerManagedBy(mgr).
		Named(kind).
		For(r.Kind.New()).
		Owns(&batchv1.Job{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.byClusterLabel)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	switch kind {
	case infrav1.TerraformClusterKind:
		// A deleting cluster waits for its machines and pools: their going triggers it.
		b = b.Watches(&infrav1.TerraformMachine{}, handler.EnqueueRequestsFromMapFunc(r.clusterOfChild)).
			Watches(&infrav1.TerraformMachinePool{}, handler.EnqueueRequestsFromMapFunc(r.clusterOfChild))
	case infrav1.TerraformMachineKind:
		b = b.Watches(&infrav1.TerraformCluster{}, handler.EnqueueRequestsFromMapFunc(r.byClusterLabel)).
			Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineInfraRef), builder.WithPredicates())
	case infrav1.TerraformMachinePoolKind:
		b = b.Watches(&infrav1.TerraformCluster{}, handler.EnqueueRequestsFromMapFunc(r.byClusterLabel)).
			Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(poolInfraRef))
	}
	return b.Complete(r)
}

// byClusterLabel maps a Cluster (or a TerraformCluster) to every object of r's kind in the
// same Cluster.
func (r *Reconciler) byClusterLabel(ctx context.Context, o client.Object) []reconcile.Request {
	cluster := o.GetName()
	if _, isCluster := o.(*clusterv1.Cluster); !isCluster {
		cluster = o.GetLabels()[clusterv1.ClusterNameLabel]
	}
	if cluster == "" {
		return nil
	}
	return r.listByCluster(ctx, o.GetNamespace(), cluster)
}

func (r *Reconciler) listByCluster(ctx context.Context, namespace, cluster string) []reconcile.Request {
	var list client.ObjectList
	switch r.Kind.Name() {
	case infrav1.TerraformClusterKind:
		list = &infrav1.TerraformClusterList{}
	case infrav1.TerraformMachineKind:
		list = &infrav1.TerraformMachineList{}
	default:
		list = &infrav1.TerraformMachinePoolList{}
	}
	if err := ListOwned(ctx, r.Client, list, namespace, cluster); err != nil {
		return nil
	}
	var out []reconcile.Request
	_ = forEachItem(list, func(o client.Object) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
	})
	return out
}

func (r *Reconciler) clusterOfChild(ctx context.Context, o client.Object) []reconcile.Request {
	cluster := o.GetLabels()[clusterv1.ClusterNameLabel]
	if cluster == "" {
		return nil
	}
	return r.listByCluster(ctx, o.GetNamespace(), cluster)
}

func machineInfraRef(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.Kind != infrav1.TerraformMachineKind || m.Spec.InfrastructureRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

func poolInfraRef(_ context.Context, o client.Object) []reconcile.Request {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	ref := mp.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != infrav1.TerraformMachinePoolKind || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: ref.Name}}}
}

func forEachItem(list client.ObjectList, fn func(client.Object)) error {
	switch l := list.(type) {
	case *infrav1.TerraformClusterList:
		for i := range l.Items {
			fn(&l.Items[i])
		}
	case *infrav1.TerraformMachineList:
		for i := range l.Items {
			fn(&l.Items[i])
		}
	case *infrav1.TerraformMachinePoolList:
		for i := range l.Items {
			fn(&l.Items[i])
		}
	}
	return nil
}
