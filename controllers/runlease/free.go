package runlease

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// Pod labels that name a pod's Job (aliases of jobstatus's, kept for callers and tests).
const (
	JobNameLabel       = jobstatus.JobNameLabel
	LegacyJobNameLabel = jobstatus.LegacyJobNameLabel
)

// VerdictReason says why a lease is free or live.
type VerdictReason string

// Why a lease is free.
const (
	// FreeNoHolder: the lease names no holder.
	FreeNoHolder VerdictReason = "NoHolder"
	// FreePastBackstop: the lease is older than its backstop, whatever its holder.
	FreePastBackstop VerdictReason = "PastBackstop"
	// FreeHolderFinished: the holder Job of this owner finished and none of its pods is
	// non-terminal.
	FreeHolderFinished VerdictReason = "HolderFinished"
	// FreeHolderGone: no Job of that name exists, no pod of that name is non-terminal, and the
	// lease is older than the grace.
	FreeHolderGone VerdictReason = "HolderGone"
	// FreeHolderForeign: a Job of that name exists but carries another object's owner labels
	// (the lease is not evidenced by a Job of its owner), and the lease is older than the grace.
	FreeHolderForeign VerdictReason = "HolderOfAnotherObject"
)

// Why a lease is live.
const (
	// LiveHolderRunning: the holder Job of this owner exists and has not finished.
	LiveHolderRunning VerdictReason = "HolderRunning"
	// LivePodsRunning: the holder Job finished, or is gone, but a pod of that name is still
	// non-terminal (pending, running, or terminating).
	LivePodsRunning VerdictReason = "HolderPodsRunning"
	// LiveWithinGrace: no running Job of this owner holds the lease, but the lease is younger
	// than the grace: the Job may still be created.
	LiveWithinGrace VerdictReason = "WithinGrace"
)

// Verdict is the judgement of one lease at one instant.
type Verdict struct {
	// Free means the lease may be taken over.
	Free bool
	// Reason says which rule decided.
	Reason VerdictReason
	// Age is now minus the time the holder last took or refreshed the lease.
	Age time.Duration
	// Backstop is the lease's backstop (leaseDurationSeconds, or the default).
	Backstop time.Duration
	// needPods marks a free verdict that a non-terminal pod of the holder would overturn.
	needPods bool
}

// Assess judges a lease. owner is the object the lease belongs to (a run lease's object, or the
// TerraformCluster of a cluster lease); holder is the live Job named by spec.holderIdentity, or
// nil when the API server has none; pods are the pods found live by the Job-name labels
// (JobNameLabel or LegacyJobNameLabel) of the holder. It is pure: same inputs, same verdict.
//
// The rules, in order:
//  1. no holder: free;
//  2. no Job of the holder's name, but a non-terminal pod of that name labelled for this
//     owner (the garbage collector orphaned it when the Job was deleted with propagation
//     Orphan): live, past the backstop too. No Job deadline ends that pod any more, so the
//     lease follows the pod's own life and frees once the pod is terminal or gone (rule 5);
//  3. older than the backstop: free, whatever the holder. The backstop is leaseDurationSeconds
//     but never less than BackstopFloor: the backstop of the holder Job's own deadline when a
//     Job of this owner holds the lease, else that of the shortest deadline the API accepts;
//     and when a Job of this owner holds it, the age is never more than that Job's own age;
//  4. a Job of this owner (jobstatus.SameObject: its owner labels, or its controller owner
//     reference) holds it: live while it has not finished; once Complete or Failed, free
//     unless one of its pods is still non-terminal;
//  5. otherwise (no Job of that name, or a Job of another object, which is a lease nothing of
//     this owner backs): live inside the grace; past it, live while a pod of that name is still
//     non-terminal (a Job deleted without waiting for its pods), else free.
//
// The lease's time is spec.renewTime (else acquireTime, else the lease-acquired-at annotation,
// else its creation time); a time more than the grace in the future is not believed and the
// creation time, which the API server sets, is used instead.
func Assess(lease *coordinationv1.Lease, owner Owner, holder *batchv1.Job, pods []corev1.Pod, now time.Time, opts Options) Verdict {
	opts = opts.withDefaults()
	name := holderOf(lease)
	own := holder != nil && holder.Name == name && holder.Namespace == lease.Namespace && jobstatus.SameObject(holder, owner.Kind, owner.Name)
	v := Verdict{Backstop: trustedBackstop(lease, holder, own, opts)}
	v.Age = now.Sub(leaseTime(lease, now, opts))
	if name == "" {
		v.Free, v.Reason = true, FreeNoHolder
		return v
	}
	if holder == nil && orphanOfOwnerRuns(pods, name, owner) {
		v.Reason = LivePodsRunning
		return v
	}
	if backstopAge(v.Age, holder, own, now) > v.Backstop {
		// A pod orphaned by its Job's deletion (rule 2) would overturn this.
		v.Free, v.Reason, v.needPods = true, FreePastBackstop, holder == nil
		return v
	}
	if own {
		if !jobstatus.Finished(holder) {
			v.Reason = LiveHolderRunning
			return v
		}
		return v.freeUnlessPodsRun(pods, name, FreeHolderFinished)
	}
	if v.Age <= opts.Grace {
		v.Reason = LiveWithinGrace
		return v
	}
	if holder != nil && holder.Name == name {
		// The pods of another object's Job are that object's business, not this lease's.
		v.Free, v.Reason = true, FreeHolderForeign
		return v
	}
	return v.freeUnlessPodsRun(pods, name, FreeHolderGone)
}

// freeUnlessPodsRun is the verdict the holder's pods decide: live while a pod of the holder's
// name is not terminal, else free for reason. Only listed pods decide (needPods).
func (v Verdict) freeUnlessPodsRun(pods []corev1.Pod, name string, reason VerdictReason) Verdict {
	if podsRunning(pods, name) {
		v.Reason = LivePodsRunning
		return v
	}
	v.Free, v.Reason, v.needPods = true, reason, true
	return v
}

// holderOf returns spec.holderIdentity, or "".
func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseTime is when the holder last took or refreshed the lease.
func leaseTime(l *coordinationv1.Lease, now time.Time, opts Options) time.Time {
	created := l.CreationTimestamp.Time
	var t time.Time
	switch {
	case l.Spec.RenewTime != nil:
		t = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		t = l.Spec.AcquireTime.Time
	default:
		if s, ok := l.Annotations[infrav1.LeaseAcquiredAtAnnotation]; ok {
			if p, err := time.Parse(time.RFC3339, s); err == nil {
				t = p
			}
		}
	}
	if t.IsZero() || t.After(now.Add(opts.Grace)) {
		// Nothing recorded, or a time far in the future (forged or badly skewed) that would
		// keep the lease live forever: fall back to what the API server recorded.
		return created
	}
	return t
}

// leaseBackstop is leaseDurationSeconds, or the default backstop when the lease has none.
func leaseBackstop(l *coordinationv1.Lease, opts Options) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return opts.Backstop(0)
}

// BackstopFloor is the shortest backstop the rules trust for a lease: the backstop of the
// shortest deadline the API accepts (MinActiveDeadlineSeconds), which no lease the manager
// writes undercuts, and, when the holder is a Job of the lease's owner (own), the backstop of
// that Job's own spec.activeDeadlineSeconds (a Job without a deadline gets the default), the
// deadline the manager computed the lease's duration from.
func BackstopFloor(holder *batchv1.Job, own bool, opts Options) time.Duration {
	floor := opts.Backstop(MinActiveDeadlineSeconds)
	if own && holder != nil {
		var deadline int64
		if holder.Spec.ActiveDeadlineSeconds != nil {
			deadline = *holder.Spec.ActiveDeadlineSeconds
		}
		floor = max(floor, opts.Backstop(max(deadline, 0)))
	}
	return floor
}

// backstopAge is the age the backstop is measured against: the lease's age, but when a Job of
// the owner holds it, never more than that Job's own age. The manager takes or refreshes a lease
// before it creates the Job, so a lease time earlier than the Job's creation was not written by
// the manager for this operation (times moved into the past) and buys nothing.
func backstopAge(age time.Duration, holder *batchv1.Job, own bool, now time.Time) time.Duration {
	if own && holder != nil && !holder.CreationTimestamp.IsZero() {
		return min(age, now.Sub(holder.CreationTimestamp.Time))
	}
	return age
}

// trustedBackstop is the lease's backstop, never below BackstopFloor: the manager writes
// leaseDurationSeconds from the same deadline the Job carries, so a shorter one was not
// written by the manager for this operation (a forged or edited lease) and buys nothing.
func trustedBackstop(l *coordinationv1.Lease, holder *batchv1.Job, own bool, opts Options) time.Duration {
	return max(leaseBackstop(l, opts), BackstopFloor(holder, own, opts))
}

// podsRunning reports a non-terminal pod of the Job jobName among pods (jobstatus's rule).
// orphanOfOwnerRuns reports a non-terminal pod of Job jobName that carries owner's labels: a pod
// of the owner's own Job whose Job is gone.
func orphanOfOwnerRuns(pods []corev1.Pod, jobName string, owner Owner) bool {
	for i := range pods {
		p := &pods[i]
		if jobstatus.PodOfJobNamed(p, jobName) && !jobstatus.PodTerminal(p) && naming.OwnedBy(p.Labels, owner.Kind, owner.Name) {
			return true
		}
	}
	return false
}

func podsRunning(pods []corev1.Pod, jobName string) bool {
	for i := range pods {
		if jobstatus.PodOfJobNamed(&pods[i], jobName) && !jobstatus.PodTerminal(&pods[i]) {
			return true
		}
	}
	return false
}
