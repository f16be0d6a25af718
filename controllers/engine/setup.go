package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformmachines;terraformmachinepools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/status;terraformmachines/status;terraformmachinepools/status,verbs=patch
// Every object the manager creates for a CAPTF object (its Jobs, Secrets, the runner's
// ServiceAccount, Role and RoleBinding) names it as controller with blockOwnerDeletion, which an
// API server running OwnerReferencesPermissionEnforcement allows only to a writer that may update
// the owner's finalizers subresource (docs/permissions.md).
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/finalizers;terraformmachines/finalizers;terraformmachinepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformidentities,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinepools,verbs=list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create
// The identity-token audience check (jobs.AudienceProbe): a short-lived token of the probe
// account, reviewed by the API server. The probe account has no permissions.
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create,resourceNames=captf-audience-probe
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;create;update
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create;update

// SetupWithManager registers the controller of r.Kind with its watches: the object itself, its
// Jobs (owner references), its Cluster (pause, deletion), and the kind's own dependencies.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), r.Kind.New(), ownerNameIndex, func(o client.Object) []string {
		return []string{naming.LabelValue(o.GetName())}
	}); err != nil {
		return fmt.Errorf("index %s by owner label value: %w", r.Kind.Name(), err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.Kind.Name()).
		For(r.Kind.New()).
		Owns(&batchv1.Job{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.SameCluster)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	if r.SecretMeta != nil {
		// The state Secret, its backups and the durable inputs: a deleted or new one is news
		// for the object that owns it (its labels say which).
		b = b.WatchesMetadata(SecretMetadata(), handler.EnqueueRequestsFromMapFunc(r.ownerOfSecret))
	}
	for _, w := range r.Kind.Watches() {
		m := w.Map
		if m == nil {
			m = r.SameCluster
		}
		switch {
		case !w.BootstrapData:
			b = b.Watches(w.Object, handler.EnqueueRequestsFromMapFunc(m))
		case r.BootstrapMeta != nil:
			b = b.WatchesRawSource(source.Kind[client.Object](r.BootstrapMeta, SecretMetadata(), handler.EnqueueRequestsFromMapFunc(m)))
		}
	}
	// The plan policies and the namespaces' metadata are watched to be cached, and wake no
	// object: a policy judges the plans made after it changed (docs/plans.md).
	b = b.Watches(&infrav1.TerraformPlanPolicy{}, handler.EnqueueRequestsFromMapFunc(wakeNothing)).
		WatchesMetadata(NamespaceMetadata(), handler.EnqueueRequestsFromMapFunc(wakeNothing))
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("build %s controller: %w", r.Kind.Name(), err)
	}
	return nil
}

// ownerNameIndex indexes the objects of a kind by the value their name takes in the owner labels
// of their Secrets and Jobs (naming.LabelValue).
const ownerNameIndex = "captf.io/owner-name-label"

func wakeNothing(context.Context, client.Object) []reconcile.Request { return nil }

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
	// Only the names are read: no deep copy of each member (a large cluster's members, at every
	// event of its Cluster or of a bootstrap Secret).
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster},
		client.UnsafeDisableDeepCopy); err != nil {
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

// SecretMetadata is the object the metadata informer of CAPTF's Secrets is keyed by (the
// manager's cache selects only those labelled captf.io/managed=true).
func SecretMetadata() *metav1.PartialObjectMetadata {
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return s
}

// ownerOfSecret maps a CAPTF Secret to the object of r's kind its owner labels name.
func (r *Reconciler) ownerOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[infrav1.OwnerKindLabel] != r.Kind.Name() || l[infrav1.OwnerNameLabel] == "" {
		return nil
	}
	// The index finds the objects whose name gives the label's value, so an event costs no
	// listing of the namespace; only their names are read (no deep copy).
	list := r.Kind.NewList()
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{ownerNameIndex: l[infrav1.OwnerNameLabel]},
		client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "map a secret to its owner", "secret", o.GetName())
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		if obj, ok := item.(client.Object); ok && naming.OwnedBy(l, r.Kind.Name(), obj.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
		}
		return nil
	})
	return out
}
