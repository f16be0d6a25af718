package runlease

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// Evidence is what the API server says, right now, about an object's run lease. The webhook
// guard and the cache-lag checks decide on it; it applies the same rules as Acquire.
type Evidence struct {
	// LeaseName is the object's run lease.
	LeaseName string
	// Found is false when the API server has no such lease.
	Found bool
	// Holder is the lease's spec.holderIdentity: the Job it was taken for.
	Holder string
	// Operation is the operation the lease was taken for.
	Operation infrav1.Operation
	// AcquiredAt is when the holder last took or refreshed the lease.
	AcquiredAt time.Time
	// Job is the holder Job as the API server has it; nil when absent (or not read because the
	// lease has no holder).
	Job *batchv1.Job
	// JobOfOwner is true when Job is a Job of this object (jobstatus.SameObject: its owner
	// labels or its controller owner reference).
	JobOfOwner bool
	// Pods are the holder's pods as read to judge the lease, when they were read (PodsListed):
	// a caller judging the same Job again reuses them instead of listing them twice.
	Pods       []corev1.Pod
	PodsListed bool
	// Verdict is Assess's judgement of the lease.
	Verdict Verdict
}

// Live reports that a Job of this object holds the lease and runs (or its pods do), or may
// still be created (the lease is inside the grace): everything but a free lease.
func (e Evidence) Live() bool { return e.Found && !e.Verdict.Free }

// HolderRuns reports that the holder Job of this object exists and has not finished, or that a
// pod of that name is still non-terminal.
func (e Evidence) HolderRuns() bool {
	return e.Found && (e.Verdict.Reason == LiveHolderRunning || e.Verdict.Reason == LivePodsRunning)
}

// MayStillBeCreated reports a lease inside the grace whose Job is not on the API server yet.
func (e Evidence) MayStillBeCreated() bool {
	return e.Found && e.Verdict.Reason == LiveWithinGrace && e.Job == nil
}

// RunEvidence reads owner's run lease live and judges it, reading its holder Job (and, when
// they matter, the holder's pods) live too.
func (m *Manager) RunEvidence(ctx context.Context, owner Owner) (Evidence, error) {
	if err := owner.validate(); err != nil {
		return Evidence{}, fmt.Errorf("run lease evidence: %w", err)
	}
	e := Evidence{LeaseName: owner.RunLeaseName()}
	var l coordinationv1.Lease
	err := m.live.Get(ctx, types.NamespacedName{Namespace: owner.Namespace, Name: e.LeaseName}, &l)
	if apierrors.IsNotFound(err) {
		e.Verdict = Verdict{Free: true, Reason: FreeNoHolder}
		return e, nil
	}
	if err != nil {
		return Evidence{}, fmt.Errorf("read run lease %s/%s: %w", owner.Namespace, e.LeaseName, err)
	}
	e.Found = true
	e.Holder = holderOf(&l)
	e.Operation = infrav1.Operation(l.Annotations[infrav1.LeaseOpAnnotation])
	e.AcquiredAt = leaseTime(&l, m.opts.Clock.Now(), m.opts)
	j, err := m.judgeRead(ctx, &l, owner, nil, false)
	if err != nil {
		return Evidence{}, fmt.Errorf("run lease evidence: %w", err)
	}
	e.Verdict, e.Job, e.Pods, e.PodsListed = j.verdict, j.job, j.pods, j.podsListed
	e.JobOfOwner = jobstatus.SameObject(j.job, owner.Kind, owner.Name)
	return e, nil
}
