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
func (e Evidence) HolderRuns() bool { return e.Found && holderRuns(e.Verdict) }

// MayStillBeCreated reports a lease inside the grace whose Job is not on the API server yet.
func (e Evidence) MayStillBeCreated() bool { return e.Found && mayStillBeCreated(e.Verdict, e.Job) }

// Blocks reports whether the lease forbids removing the object's evidence (block-move,
// status.activeJob, the finalizer): its holder runs, or may still be created. The admission
// guard (webhooks.Decide) and the controller's cache-lag check (cachelag.Check) both judge a
// removal by it.
func (e Evidence) Blocks() bool { return e.Found && blocks(e.Verdict, e.Job) }

// The rules of a live lease, shared by Evidence (an owner the caller knows) and
// LeaseJudgement (an owner found from the lease's name).
func holderRuns(v Verdict) bool {
	return v.Reason == LiveHolderRunning || v.Reason == LivePodsRunning
}

func mayStillBeCreated(v Verdict, job *batchv1.Job) bool {
	return v.Reason == LiveWithinGrace && job == nil
}

func blocks(v Verdict, job *batchv1.Job) bool { return holderRuns(v) || mayStillBeCreated(v, job) }

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
