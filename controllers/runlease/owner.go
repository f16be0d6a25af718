package runlease

import (
	"context"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// Name prefixes of CAPTF's two leases (naming.RunLeaseName, naming.ClusterLeaseName).
var (
	runLeasePrefix     = naming.RunLeaseName("")
	clusterLeasePrefix = withoutHash(naming.ClusterLeaseName("namespace", "cluster"))
)

func withoutHash(name string) string { return name[:len(name)-naming.SuffixLength] }

// LeaseKindOf says, from a Lease's name alone, whether it is a run lease (infrav1.LeaseKindRun),
// a cluster lease (infrav1.LeaseKindCluster) or neither (""). Labels play no part: they can be
// edited by anyone who may update the Lease.
func LeaseKindOf(name string) string {
	switch {
	case strings.HasPrefix(name, runLeasePrefix) && len(name) == len(runLeasePrefix)+naming.SuffixLength:
		return infrav1.LeaseKindRun
	case strings.HasPrefix(name, clusterLeasePrefix) && len(name) == len(clusterLeasePrefix)+naming.SuffixLength:
		return infrav1.LeaseKindCluster
	}
	return ""
}

// LeaseJudgement is a lease judged with its owner found from its name (JudgeLease).
type LeaseJudgement struct {
	// Kind is infrav1.LeaseKindRun or LeaseKindCluster.
	Kind string
	// Owner is the object the lease belongs to; OwnerFound is false when nothing the API server
	// has names one (the object is gone and the holder Job names none), and the lease was then
	// judged as backed by no Job of any object: worth the grace and its holder's pods only.
	Owner      Owner
	OwnerFound bool
	// Verdict is Assess's judgement; Job is the holder Job as read (nil when absent).
	Verdict Verdict
	Job     *batchv1.Job
}

// HolderRuns reports that the holder Job of the owner exists and has not finished, or that a
// pod of the holder's name is still non-terminal.
func (j LeaseJudgement) HolderRuns() bool { return holderRuns(j.Verdict) }

// MayStillBeCreated reports a lease inside the grace whose Job is not on the API server yet.
func (j LeaseJudgement) MayStillBeCreated() bool { return mayStillBeCreated(j.Verdict, j.Job) }

// Blocks reports what blocks a removal of evidence, as the lease guard judges a lease: the
// holder runs, or may still be created (the rule of Evidence.Blocks).
func (j LeaseJudgement) Blocks() bool { return blocks(j.Verdict, j.Job) }

// JudgeLease judges a run or cluster lease whose owner the caller does not know (an admission
// request for a Lease): it reads the holder Job live, finds the owner from the lease's name
// (OwnerOfLease), and applies the rules of Judge. ok is false for a Lease whose name is not a
// CAPTF run or cluster lease name.
func (m *Manager) JudgeLease(ctx context.Context, l *coordinationv1.Lease) (LeaseJudgement, bool, error) {
	kind := LeaseKindOf(l.Name)
	if kind == "" {
		return LeaseJudgement{}, false, nil
	}
	var job *batchv1.Job
	if h := holderOf(l); h != "" {
		var err error
		if job, err = m.getJob(ctx, l.Namespace, h); err != nil {
			return LeaseJudgement{}, true, err
		}
	}
	owner, found, err := m.OwnerOfLease(ctx, l, job)
	if err != nil {
		return LeaseJudgement{}, true, err
	}
	j, err := m.judgeRead(ctx, l, owner, job, true)
	if err != nil {
		return LeaseJudgement{}, true, err
	}
	return LeaseJudgement{Kind: kind, Owner: owner, OwnerFound: found, Verdict: j.verdict, Job: j.job}, true, nil
}

// OwnerOfLease finds the object a run or cluster lease belongs to from the lease's name and the
// objects the API server has, never from the lease's labels alone. holder is the lease's holder
// Job as just read live (nil when absent).
//
//   - A run lease is named after its object's state suffix (naming.StateSuffix of namespace,
//     kind and name): a candidate is accepted only when its suffix is the lease's. Candidates
//     are the holder Job's controller owner reference, then the holder Job's and the lease's
//     owner labels (hints, checked like any other); when none matches, the three kinds in the
//     namespace are listed live and the one whose suffix matches is the owner.
//   - A cluster lease is named after namespace and Cluster (naming.ClusterLeaseName): its owner
//     is the TerraformCluster, read live, whose cluster-name label gives that name. Candidates
//     are read by name as above; when none matches, the TerraformClusters of the namespace are
//     listed live. When no TerraformCluster matches (it is gone), the holder Job's controller
//     owner reference (a TerraformCluster) names it.
//
// found is false when nothing names an owner; the returned Owner then has no kind, and Assess
// counts no Job as its own. The Owner's Cluster is filled only when the owner was read.
func (m *Manager) OwnerOfLease(ctx context.Context, l *coordinationv1.Lease, holder *batchv1.Job) (Owner, bool, error) {
	cands := ownerCandidates(l, holder)
	switch LeaseKindOf(l.Name) {
	case infrav1.LeaseKindRun:
		return m.ownerOfRunLease(ctx, l, cands)
	case infrav1.LeaseKindCluster:
		return m.ownerOfClusterLease(ctx, l, holder, cands)
	}
	return Owner{Namespace: l.Namespace}, false, nil
}

// candidate is a kind and name that may own a lease, to be checked against the lease's name.
type candidate struct{ kind, name string }

// ownerCandidates are the hints OwnerOfLease checks first, in order: the holder Job's controller
// owner reference, the holder Job's owner labels, the lease's owner labels.
func ownerCandidates(l *coordinationv1.Lease, holder *batchv1.Job) []candidate {
	var cands []candidate
	if holder != nil {
		if ref := metav1.GetControllerOf(holder); ref != nil {
			cands = append(cands, candidate{ref.Kind, ref.Name})
		}
		cands = append(cands, candidate{holder.Labels[infrav1.OwnerKindLabel], holder.Labels[infrav1.OwnerNameLabel]})
	}
	return append(cands, candidate{l.Labels[infrav1.OwnerKindLabel], l.Labels[infrav1.OwnerNameLabel]})
}

// ownerOfRunLease finds a run lease's owner: the first candidate whose state suffix is the
// lease's, else the object of the three kinds, listed live, whose suffix is.
func (m *Manager) ownerOfRunLease(ctx context.Context, l *coordinationv1.Lease, cands []candidate) (Owner, bool, error) {
	ns := l.Namespace
	suffix := strings.TrimPrefix(l.Name, runLeasePrefix)
	for _, c := range cands {
		if reconciledKind(c.kind) && c.name != "" && naming.StateSuffix(ns, c.kind, c.name) == suffix {
			return Owner{Namespace: ns, Kind: c.kind, Name: c.name}, true, nil
		}
	}
	for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
		items, err := m.listMeta(ctx, ns, kind)
		if err != nil {
			return Owner{}, false, err
		}
		for i := range items {
			if naming.StateSuffix(ns, kind, items[i].Name) == suffix {
				return Owner{Namespace: ns, Kind: kind, Name: items[i].Name, Cluster: items[i].Labels[infrav1.ClusterNameLabel]}, true, nil
			}
		}
	}
	return Owner{Namespace: ns}, false, nil
}

// ownerOfClusterLease finds a cluster lease's owner in three steps: the TerraformCluster a
// candidate names, read live, whose cluster-name label gives the lease's name; else the
// TerraformCluster of the namespace, listed live, that does; else (it is gone) the
// TerraformCluster the holder Job's controller owner reference names.
func (m *Manager) ownerOfClusterLease(ctx context.Context, l *coordinationv1.Lease, holder *batchv1.Job, cands []candidate) (Owner, bool, error) {
	if o, ok, err := m.clusterOwnerNamed(ctx, l, cands); err != nil || ok {
		return o, ok, err
	}
	if o, ok, err := m.clusterOwnerListed(ctx, l); err != nil || ok {
		return o, ok, err
	}
	if holder != nil {
		if ref := metav1.GetControllerOf(holder); ref != nil && ref.Kind == infrav1.TerraformClusterKind {
			return Owner{Namespace: l.Namespace, Kind: infrav1.TerraformClusterKind, Name: ref.Name}, true, nil
		}
	}
	return Owner{Namespace: l.Namespace}, false, nil
}

// clusterOwnerNamed reads, live, each TerraformCluster a candidate names (once) and returns the
// one whose cluster-name label gives the lease's name.
func (m *Manager) clusterOwnerNamed(ctx context.Context, l *coordinationv1.Lease, cands []candidate) (Owner, bool, error) {
	ns := l.Namespace
	seen := map[string]bool{}
	for _, c := range cands {
		if c.kind != infrav1.TerraformClusterKind || c.name == "" || seen[c.name] {
			continue
		}
		seen[c.name] = true
		tc, err := m.getMeta(ctx, ns, infrav1.TerraformClusterKind, c.name)
		if err != nil {
			return Owner{}, false, err
		}
		if tc != nil && naming.ClusterLeaseName(ns, tc.Labels[infrav1.ClusterNameLabel]) == l.Name {
			return Owner{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: tc.Name, Cluster: tc.Labels[infrav1.ClusterNameLabel]}, true, nil
		}
	}
	return Owner{}, false, nil
}

// clusterOwnerListed lists the TerraformClusters of the lease's namespace live and returns the
// one whose cluster-name label gives the lease's name.
func (m *Manager) clusterOwnerListed(ctx context.Context, l *coordinationv1.Lease) (Owner, bool, error) {
	ns := l.Namespace
	items, err := m.listMeta(ctx, ns, infrav1.TerraformClusterKind)
	if err != nil {
		return Owner{}, false, err
	}
	for i := range items {
		if c := items[i].Labels[infrav1.ClusterNameLabel]; c != "" && naming.ClusterLeaseName(ns, c) == l.Name {
			return Owner{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: items[i].Name, Cluster: c}, true, nil
		}
	}
	return Owner{}, false, nil
}

func reconciledKind(kind string) bool {
	switch kind {
	case infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind:
		return true
	}
	return false
}

// getMeta reads an object's metadata live; nil when the API server has none.
func (m *Manager) getMeta(ctx context.Context, ns, kind, name string) (*metav1.PartialObjectMetadata, error) {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
	err := m.live.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err)
	}
	return o, nil
}

// listMeta lists the metadata of every object of kind in ns live, sorted by name.
func (m *Manager) listMeta(ctx context.Context, ns, kind string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind + "List"))
	if err := m.live.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", kind, ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}
