package capi

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Finalizers Cluster API's controllers put on their objects.
const (
	ClusterFinalizer     = "cluster.cluster.x-k8s.io"
	MachineFinalizer     = "machine.cluster.x-k8s.io"
	MachinePoolFinalizer = "machinepool.cluster.x-k8s.io"
)

// StandIn reconciles Clusters, Machines, MachinePools and MachineDeployments.
type StandIn struct {
	client client.Client
}

// SetupWithManager registers the stand-in's controllers.
func (s *StandIn) SetupWithManager(mgr manager.Manager) error {
	s.client = mgr.GetClient()
	skip := true
	opts := controller.Options{SkipNameValidation: &skip, MaxConcurrentReconciles: 2}
	byCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[clusterv1.ClusterNameLabel]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	if err := s.indexInfraRefs(mgr); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sandbox-cluster").For(&clusterv1.Cluster{}).
		Watches(&infrav1.TerraformCluster{}, byCluster).
		Watches(&infrav1.TerraformCluster{}, s.referrers(&clusterv1.ClusterList{}, infrav1.TerraformClusterKind)).
		Watches(&clusterv1.Machine{}, byCluster).
		Watches(&clusterv1.MachinePool{}, byCluster).
		Watches(&clusterv1.MachineDeployment{}, byCluster).
		WithOptions(opts).Complete(reconcile.Func(s.reconcileCluster)); err != nil {
		return fmt.Errorf("set up cluster stand-in: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sandbox-machine").For(&clusterv1.Machine{}).
		Watches(&infrav1.TerraformMachine{}, ownedBy("Machine")).
		Watches(&infrav1.TerraformMachine{}, s.referrers(&clusterv1.MachineList{}, infrav1.TerraformMachineKind)).
		Watches(&clusterv1.Cluster{}, members(s, &clusterv1.MachineList{})).
		WithOptions(opts).Complete(reconcile.Func(s.reconcileMachine)); err != nil {
		return fmt.Errorf("set up machine stand-in: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sandbox-machinepool").For(&clusterv1.MachinePool{}).
		Watches(&infrav1.TerraformMachinePool{}, ownedBy("MachinePool")).
		Watches(&infrav1.TerraformMachinePool{}, s.referrers(&clusterv1.MachinePoolList{}, infrav1.TerraformMachinePoolKind)).
		Watches(&clusterv1.Cluster{}, members(s, &clusterv1.MachinePoolList{})).
		WithOptions(opts).Complete(reconcile.Func(s.reconcileMachinePool)); err != nil {
		return fmt.Errorf("set up machinepool stand-in: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sandbox-machinedeployment").For(&clusterv1.MachineDeployment{}).
		WithOptions(opts).Complete(reconcile.Func(s.reconcileMachineDeployment)); err != nil {
		return fmt.Errorf("set up machinedeployment stand-in: %w", err)
	}
	return nil
}

// infraRefIndex indexes Clusters, Machines and MachinePools by the infrastructure object they
// reference ("<Kind>/<name>").
const infraRefIndex = "sandbox.captf.io/infrastructure-ref"

// indexInfraRefs registers infraRefIndex for the three kinds.
func (s *StandIn) indexInfraRefs(mgr manager.Manager) error {
	key := func(ref clusterv1.ContractVersionedObjectReference) []string {
		if ref.Kind == "" || ref.Name == "" {
			return nil
		}
		return []string{ref.Kind + "/" + ref.Name}
	}
	idx := mgr.GetFieldIndexer()
	ctx := context.Background()
	for _, f := range []struct {
		obj client.Object
		fn  client.IndexerFunc
	}{
		{&clusterv1.Cluster{}, func(o client.Object) []string { return key(o.(*clusterv1.Cluster).Spec.InfrastructureRef) }},
		{&clusterv1.Machine{}, func(o client.Object) []string { return key(o.(*clusterv1.Machine).Spec.InfrastructureRef) }},
		{&clusterv1.MachinePool{}, func(o client.Object) []string {
			return key(o.(*clusterv1.MachinePool).Spec.Template.Spec.InfrastructureRef)
		}},
	} {
		if err := idx.IndexField(ctx, f.obj, infraRefIndex, f.fn); err != nil {
			return fmt.Errorf("index %T by infrastructure reference: %w", f.obj, err)
		}
	}
	return nil
}

// referrers maps an infrastructure object of kind to the Clusters, Machines or MachinePools
// (list says which) whose infrastructure reference names it: an infrastructure object created
// after the object that references it is linked as soon as it appears, as Cluster API's
// controllers, which watch their infrastructure kinds, do.
func (s *StandIn) referrers(list client.ObjectList, kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := s.client.List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingFields{infraRefIndex: kind + "/" + o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "list referrers of an infrastructure object", "kind", kind, "name", o.GetName())
			return nil
		}
		var out []reconcile.Request
		_ = meta.EachListItem(l, func(item runtime.Object) error {
			if m, ok := item.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
			}
			return nil
		})
		return out
	})
}

// ownedBy maps an infrastructure object to its Cluster API owner of kind.
func ownedBy(kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == kind {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
			}
		}
		// Not linked yet: referrers maps it by the reference to it.
		return nil
	})
}

// members maps a Cluster to its Machines or MachinePools (a pause or unpause concerns them).
func members(s *StandIn, list client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := s.client.List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		switch l := l.(type) {
		case *clusterv1.MachineList:
			for _, m := range l.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
			}
		case *clusterv1.MachinePoolList:
			for _, m := range l.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
			}
		}
		return out
	})
}

func (s *StandIn) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &clusterv1.Cluster{}
	if err := s.client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if clusterPaused(c) {
		return reconcile.Result{}, nil
	}
	ref := c.Spec.InfrastructureRef
	tc := &infrav1.TerraformCluster{}
	var tcErr error = apierrors.NewNotFound(infrav1.GroupVersion.WithResource("terraformclusters").GroupResource(), ref.Name)
	if ref.Kind == infrav1.TerraformClusterKind && ref.Name != "" {
		tcErr = s.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, tc)
		if tcErr != nil && !apierrors.IsNotFound(tcErr) {
			return reconcile.Result{}, fmt.Errorf("get terraformcluster: %w", tcErr)
		}
	}

	if !c.DeletionTimestamp.IsZero() {
		left, err := s.deleteClusterMembers(ctx, c)
		if err != nil || left > 0 {
			return reconcile.Result{}, err
		}
		if tcErr == nil {
			if tc.DeletionTimestamp.IsZero() {
				log.FromContext(ctx).Info("cluster deleted: deleting its TerraformCluster", "terraformcluster", tc.Name)
				if err := s.client.Delete(ctx, tc); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, fmt.Errorf("delete terraformcluster: %w", err)
				}
			}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, s.removeFinalizer(ctx, c, ClusterFinalizer)
	}

	if err := s.addFinalizer(ctx, c, ClusterFinalizer); err != nil {
		return reconcile.Result{}, err
	}
	if tcErr != nil {
		return reconcile.Result{}, nil // the TerraformCluster's watch brings us back
	}
	if err := s.linkInfra(ctx, tc, c, c.Name, true); err != nil {
		return reconcile.Result{}, err
	}
	if !c.Spec.ControlPlaneEndpoint.IsValid() && tc.Spec.ControlPlaneEndpoint.IsValid() {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.ControlPlaneEndpoint = tc.Spec.ControlPlaneEndpoint
		if err := s.client.Patch(ctx, c, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set control plane endpoint: %w", err)
		}
	}
	provisioned := tc.Status.IsProvisioned()
	if ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) != provisioned {
		patch := client.MergeFrom(c.DeepCopy())
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
		if err := s.client.Status().Patch(ctx, c, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set infrastructure provisioned: %w", err)
		}
	}
	return reconcile.Result{}, nil
}

// deleteClusterMembers deletes the Cluster's Machines, MachinePools and MachineDeployments and
// returns how many are left.
func (s *StandIn) deleteClusterMembers(ctx context.Context, c *clusterv1.Cluster) (int, error) {
	var objs []client.Object
	ms := &clusterv1.MachineList{}
	mps := &clusterv1.MachinePoolList{}
	mds := &clusterv1.MachineDeploymentList{}
	for _, l := range []client.ObjectList{ms, mps, mds} {
		if err := s.client.List(ctx, l, client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
			return 0, fmt.Errorf("list cluster members: %w", err)
		}
	}
	for i := range ms.Items {
		objs = append(objs, &ms.Items[i])
	}
	for i := range mps.Items {
		objs = append(objs, &mps.Items[i])
	}
	for i := range mds.Items {
		objs = append(objs, &mds.Items[i])
	}
	for _, o := range objs {
		if o.GetDeletionTimestamp().IsZero() {
			log.FromContext(ctx).Info("cluster deleted: deleting its member", "member", fmt.Sprintf("%T %s", o, o.GetName()))
			if err := s.client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("delete %s: %w", o.GetName(), err)
			}
		}
	}
	return len(objs), nil
}

func (s *StandIn) reconcileMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := s.client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	paused, cluster, err := s.memberPaused(ctx, m, m.Spec.ClusterName)
	if err != nil || paused {
		return reconcile.Result{}, err
	}
	tm := &infrav1.TerraformMachine{}
	ref := m.Spec.InfrastructureRef
	infraErr := s.getInfra(ctx, m.Namespace, ref.Kind, infrav1.TerraformMachineKind, ref.Name, tm)
	if infraErr != nil && !apierrors.IsNotFound(infraErr) {
		return reconcile.Result{}, infraErr
	}
	if !m.DeletionTimestamp.IsZero() {
		return s.deleteWithInfra(ctx, m, tm, infraErr, MachineFinalizer)
	}
	if err := s.addFinalizer(ctx, m, MachineFinalizer); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.ownByCluster(ctx, m, cluster, m.Spec.ClusterName); err != nil {
		return reconcile.Result{}, err
	}
	if infraErr != nil {
		return reconcile.Result{}, nil
	}
	if err := s.linkInfra(ctx, tm, m, m.Spec.ClusterName, true); err != nil {
		return reconcile.Result{}, err
	}
	if m.Spec.ProviderID == "" && tm.Spec.ProviderID != "" {
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.ProviderID = tm.Spec.ProviderID
		if err := s.client.Patch(ctx, m, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set provider id: %w", err)
		}
	}
	if provisioned := tm.Status.IsProvisioned(); ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) != provisioned {
		patch := client.MergeFrom(m.DeepCopy())
		m.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
		if err := s.client.Status().Patch(ctx, m, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set infrastructure provisioned: %w", err)
		}
	}
	return reconcile.Result{}, nil
}

func (s *StandIn) reconcileMachinePool(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	mp := &clusterv1.MachinePool{}
	if err := s.client.Get(ctx, req.NamespacedName, mp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	paused, cluster, err := s.memberPaused(ctx, mp, mp.Spec.ClusterName)
	if err != nil || paused {
		return reconcile.Result{}, err
	}
	tp := &infrav1.TerraformMachinePool{}
	ref := mp.Spec.Template.Spec.InfrastructureRef
	infraErr := s.getInfra(ctx, mp.Namespace, ref.Kind, infrav1.TerraformMachinePoolKind, ref.Name, tp)
	if infraErr != nil && !apierrors.IsNotFound(infraErr) {
		return reconcile.Result{}, infraErr
	}
	if !mp.DeletionTimestamp.IsZero() {
		return s.deleteWithInfra(ctx, mp, tp, infraErr, MachinePoolFinalizer)
	}
	if err := s.addFinalizer(ctx, mp, MachinePoolFinalizer); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.ownByCluster(ctx, mp, cluster, mp.Spec.ClusterName); err != nil {
		return reconcile.Result{}, err
	}
	if infraErr != nil {
		return reconcile.Result{}, nil
	}
	if err := s.linkInfra(ctx, tp, mp, mp.Spec.ClusterName, true); err != nil {
		return reconcile.Result{}, err
	}
	if !equalStrings(mp.Spec.ProviderIDList, tp.Spec.ProviderIDList) {
		patch := client.MergeFrom(mp.DeepCopy())
		mp.Spec.ProviderIDList = append([]string(nil), tp.Spec.ProviderIDList...)
		if err := s.client.Patch(ctx, mp, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set provider id list: %w", err)
		}
	}
	if provisioned := tp.Status.IsProvisioned(); ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false) != provisioned {
		patch := client.MergeFrom(mp.DeepCopy())
		mp.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
		if err := s.client.Status().Patch(ctx, mp, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("set infrastructure provisioned: %w", err)
		}
	}
	return reconcile.Result{}, nil
}

func (s *StandIn) reconcileMachineDeployment(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	md := &clusterv1.MachineDeployment{}
	if err := s.client.Get(ctx, req.NamespacedName, md); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	paused, cluster, err := s.memberPaused(ctx, md, md.Spec.ClusterName)
	if err != nil || paused || !md.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, s.ownByCluster(ctx, md, cluster, md.Spec.ClusterName)
}

// memberPaused reports whether an object or its Cluster is paused, and returns the Cluster.
func (s *StandIn) memberPaused(ctx context.Context, o client.Object, clusterName string) (bool, *clusterv1.Cluster, error) {
	if _, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return true, nil, nil
	}
	c := &clusterv1.Cluster{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: clusterName}, c)
	if apierrors.IsNotFound(err) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("get cluster %s: %w", clusterName, err)
	}
	return clusterPaused(c), c, nil
}

func clusterPaused(c *clusterv1.Cluster) bool {
	_, ann := c.Annotations[clusterv1.PausedAnnotation]
	return ann || ptr.Deref(c.Spec.Paused, false)
}

func (s *StandIn) getInfra(ctx context.Context, ns, kind, want, name string, into client.Object) error {
	if kind != want || name == "" {
		return apierrors.NewNotFound(infrav1.GroupVersion.WithResource(want).GroupResource(), name)
	}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, into); err != nil {
		if apierrors.IsNotFound(err) {
			return err
		}
		return fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	return nil
}

// deleteWithInfra deletes the infrastructure object of a deleting Machine or MachinePool and
// drops the finalizer once it is gone.
func (s *StandIn) deleteWithInfra(ctx context.Context, o, infra client.Object, infraErr error, finalizer string) (reconcile.Result, error) {
	if infraErr == nil {
		if infra.GetDeletionTimestamp().IsZero() {
			log.FromContext(ctx).Info("deleting the infrastructure object", "name", infra.GetName())
			if err := s.client.Delete(ctx, infra); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("delete %s: %w", infra.GetName(), err)
			}
		}
		// The infrastructure object's watch brings us back when it is gone; look again in a
		// while in case it went before the watch was set.
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return reconcile.Result{}, s.removeFinalizer(ctx, o, finalizer)
}

// linkInfra makes owner the controller owner of an infrastructure object and labels it with
// the cluster name, as Cluster API's controllers do.
func (s *StandIn) linkInfra(ctx context.Context, infra, owner client.Object, clusterName string, controller bool) error {
	patch := client.MergeFrom(infra.DeepCopyObject().(client.Object))
	changed := false
	if infra.GetLabels()[clusterv1.ClusterNameLabel] != clusterName {
		l := infra.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[clusterv1.ClusterNameLabel] = clusterName
		infra.SetLabels(l)
		changed = true
	}
	gvk, err := s.client.GroupVersionKindFor(owner)
	if err != nil {
		return fmt.Errorf("kind of %s: %w", owner.GetName(), err)
	}
	ref := metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID()}
	if controller {
		ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	}
	if !hasOwner(infra, ref) {
		infra.SetOwnerReferences(upsertOwner(infra.GetOwnerReferences(), ref))
		changed = true
	}
	if !changed {
		return nil
	}
	if err := s.client.Patch(ctx, infra, patch); err != nil {
		return fmt.Errorf("link %s to %s: %w", infra.GetName(), owner.GetName(), err)
	}
	return nil
}

// ownByCluster adds the Cluster as a (non-controller) owner and the cluster-name label.
func (s *StandIn) ownByCluster(ctx context.Context, o client.Object, c *clusterv1.Cluster, clusterName string) error {
	if c == nil {
		return nil
	}
	return s.linkInfra(ctx, o, c, clusterName, false)
}

func hasOwner(o client.Object, ref metav1.OwnerReference) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == ref.Kind && r.Name == ref.Name && r.UID == ref.UID && ptr.Deref(r.Controller, false) == ptr.Deref(ref.Controller, false) {
			return true
		}
	}
	return false
}

// upsertOwner replaces a reference to the same kind and name (a moved object's owner has a
// new UID) or appends it.
func upsertOwner(refs []metav1.OwnerReference, ref metav1.OwnerReference) []metav1.OwnerReference {
	for i := range refs {
		if refs[i].Kind == ref.Kind && refs[i].Name == ref.Name {
			refs[i] = ref
			return refs
		}
	}
	return append(refs, ref)
}

func (s *StandIn) addFinalizer(ctx context.Context, o client.Object, f string) error {
	if controllerutil.ContainsFinalizer(o, f) {
		return nil
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(o, f)
	if err := s.client.Patch(ctx, o, patch); err != nil {
		return fmt.Errorf("add finalizer to %s: %w", o.GetName(), err)
	}
	return nil
}

func (s *StandIn) removeFinalizer(ctx context.Context, o client.Object, f string) error {
	if !controllerutil.ContainsFinalizer(o, f) {
		return nil
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(o, f)
	if err := s.client.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer from %s: %w", o.GetName(), err)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
