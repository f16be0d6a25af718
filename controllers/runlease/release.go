package runlease

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// stateLockPrefix starts the Terraform backend's own lock Lease. It is terraform's, not a run or
// cluster lease: the lease cleanup here skips it whatever its labels say, and only the engine's
// deletion cleanup deletes it, once the state is gone and no terraform holds it
// (controllers/engine/cleanup.go, deleteUnheldStateLock).
var stateLockPrefix = strings.TrimSuffix(naming.StateLockLeaseName(""), "-")

// Release gives back the leases holder holds for owner: the run lease and, for a
// TerraformCluster, the cluster lease. Call it from the pass that counts holder's finished Job.
// Each lease is read live first and deleted only if holder still holds it, with UID and
// resourceVersion preconditions, so a lease another holder took meanwhile stays. It returns the
// names of the leases it deleted. A failure is for the caller to log: a lease whose Job
// finished is free anyway.
func (m *Manager) Release(ctx context.Context, owner Owner, holder string) ([]string, error) {
	if err := owner.validate(); err != nil {
		return nil, fmt.Errorf("release leases: %w", err)
	}
	names := []string{owner.RunLeaseName()}
	if owner.IsCluster() && owner.Cluster != "" {
		names = append(names, owner.ClusterLeaseName())
	}
	var released []string
	for _, name := range names {
		ok, err := m.releaseOne(ctx, owner.Namespace, name, holder)
		if err != nil {
			return released, err
		}
		if ok {
			released = append(released, name)
		}
	}
	if len(released) > 0 {
		log.FromContext(ctx).V(1).Info("released leases", "holder", holder, "leases", released)
	}
	return released, nil
}

// ReleaseIfNoJob gives back holder's leases only when a live read shows that the API server has
// no Job named holder. Call it after a create was rejected (invalid, forbidden, unauthorized,
// too large, namespace gone) and from a pass that waited at the gate without creating its Job;
// never after a timeout or a server error, which may hide a create that went through. A Job of
// that name, whoever created it, keeps the leases. It reports whether the Job was absent and
// the leases deleted.
func (m *Manager) ReleaseIfNoJob(ctx context.Context, owner Owner, holder string) (bool, []string, error) {
	if err := owner.validate(); err != nil {
		return false, nil, fmt.Errorf("release leases: %w", err)
	}
	exists, err := m.jobExists(ctx, owner.Namespace, holder)
	if err != nil {
		return false, nil, err
	}
	if exists {
		return false, nil, nil
	}
	released, err := m.Release(ctx, owner, holder)
	return true, released, err
}

// Cleanup deletes every run and cluster lease owner owns (selected by the owner labels and the
// captf.io/lease label; the Terraform backend's lock Lease is never touched) that Assess finds
// free. Live leases are kept and returned: a Job of the object runs or may still be created, so
// the caller waits and calls again. Call it when the object is cleaned up after its destroy.
func (m *Manager) Cleanup(ctx context.Context, owner Owner) (kept []string, err error) {
	if err := owner.validate(); err != nil {
		return nil, fmt.Errorf("clean up leases: %w", err)
	}
	kinds, err := labels.NewRequirement(infrav1.LeaseLabel, selection.In, []string{infrav1.LeaseKindRun, infrav1.LeaseKindCluster})
	if err != nil {
		return nil, fmt.Errorf("clean up leases: %w", err)
	}
	sel := labels.SelectorFromSet(labels.Set{
		infrav1.ManagedLabel:   "true",
		infrav1.OwnerKindLabel: owner.Kind,
		infrav1.OwnerNameLabel: naming.LabelValue(owner.Name),
	}).Add(*kinds)
	var leases coordinationv1.LeaseList
	if err := m.live.List(ctx, &leases, client.InNamespace(owner.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list leases of %s %s/%s: %w", owner.Kind, owner.Namespace, owner.Name, err)
	}
	logger := log.FromContext(ctx)
	for i := range leases.Items {
		l := &leases.Items[i]
		if strings.HasPrefix(l.Name, stateLockPrefix) {
			continue // the Terraform backend's lock, whatever its labels say
		}
		v, err := m.judge(ctx, l, owner)
		if err != nil {
			return kept, err
		}
		if !v.Free {
			kept = append(kept, l.Name)
			continue
		}
		if _, err := m.deleteIfUnchanged(ctx, l); err != nil {
			return kept, err
		}
		logger.V(1).Info("deleted lease", "lease", l.Name, "rule", v.Reason)
	}
	return kept, nil
}

// Confirm reads the leases live and reports whether req.Holder still holds everything its
// operation needs: the run lease and, for a cluster's mutating operation with the gate on, the
// cluster lease. Call it right before creating the Job.
func (m *Manager) Confirm(ctx context.Context, req Request) (bool, error) {
	if err := req.validate(m.opts.ClusterOperationGate); err != nil {
		return false, fmt.Errorf("confirm leases: %w", err)
	}
	names := []string{req.Owner.RunLeaseName()}
	if m.opts.ClusterOperationGate && req.Operation.Mutating() && req.Owner.IsCluster() {
		names = append(names, req.Owner.ClusterLeaseName())
	}
	for _, name := range names {
		var l coordinationv1.Lease
		err := m.live.Get(ctx, types.NamespacedName{Namespace: req.Owner.Namespace, Name: name}, &l)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read lease %s/%s: %w", req.Owner.Namespace, name, err)
		}
		if holderOf(&l) != req.Holder {
			return false, nil
		}
	}
	return true, nil
}

// releaseOne reads a lease live and deletes it if holder holds it.
func (m *Manager) releaseOne(ctx context.Context, namespace, name, holder string) (bool, error) {
	var l coordinationv1.Lease
	err := m.live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &l)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read lease %s/%s: %w", namespace, name, err)
	}
	if holderOf(&l) != holder {
		return false, nil
	}
	return m.deleteIfUnchanged(ctx, &l)
}

// deleteIfUnchanged deletes the lease only in the version given (UID and resourceVersion
// preconditions). A lease changed or removed since reports false without an error.
func (m *Manager) deleteIfUnchanged(ctx context.Context, l *coordinationv1.Lease) (bool, error) {
	pre := client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)}
	if err := m.client.Delete(ctx, l, pre); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("delete lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return true, nil
}
