package channel

import (
	"context"
	"fmt"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// staleVerdict is the outcome of the I8 checks on a held lock.
type staleVerdict struct {
	// breakable: all of (a) to (c) hold; (d) is the conditional write that follows.
	breakable bool
	// why names the first condition that failed (for the log).
	why string
	// pod and job held the lock.
	pod, job string
}

// judgeStale checks the conditions of ARCHITECTURE.md I8 on a lock Lease held by another ID,
// reading everything live:
//
//	(a) its holder is a pod of one of this object's own Jobs: the lock carries the pod and Job
//	    annotations only a state channel writes, that Job exists and is controlled by the
//	    object's UID (and labelled with its kind and name), and the pod, if it still exists,
//	    belongs to that Job;
//	(b) that pod is gone or terminal (runnerapi.PodTerminal: Succeeded or Failed);
//	(c) this channel's Job holds the object's run lease.
//
// (d), that the lock is still the one read, is the resourceVersion of the write that breaks
// it. Any error reading the evidence means "not breakable".
func (s *server) judgeStale(ctx context.Context, lock object) (staleVerdict, error) {
	ann := lock.annotations()
	v := staleVerdict{pod: ann[runnerapi.LockPodAnnotation], job: ann[runnerapi.LockJobAnnotation]}
	// (a) the holder is a pod of one of this object's own Jobs.
	if v.pod == "" || v.job == "" {
		v.why = "the lock was not taken by a state channel (no pod and Job annotations)"
		return v, nil
	}
	job, err := s.store.getJob(ctx, v.job)
	if err != nil {
		return v, err
	}
	if job == nil {
		v.why = fmt.Sprintf("the holder's Job %s no longer exists, so it cannot be shown to be this object's", v.job)
		return v, nil
	}
	labels := job.labels()
	if job.controllerUID() != s.cfg.OwnerUID || labels[runnerapi.JobOwnerKindLabel] != s.cfg.OwnerKind || labels[runnerapi.JobOwnerNameLabel] != s.ownerNameLabel {
		v.why = fmt.Sprintf("the holder's Job %s belongs to another object", v.job)
		return v, nil
	}
	pod, err := s.store.getPod(ctx, v.pod)
	if err != nil {
		return v, err
	}
	if pod != nil && !podOfJob(pod, job) {
		v.why = fmt.Sprintf("the holder's pod %s is not a pod of Job %s", v.pod, v.job)
		return v, nil
	}
	// (b) that pod is gone or terminal.
	if pod != nil {
		if p := pod.phase(); !runnerapi.PodTerminal(p) {
			v.why = fmt.Sprintf("the holder's pod %s is %s, not gone or terminal", v.pod, orUnknown(p))
			return v, nil
		}
	}
	// (c) this Job holds the run lease.
	holder, err := s.store.runLeaseHolder(ctx)
	if err != nil {
		return v, err
	}
	if holder != s.cfg.Job {
		v.why = fmt.Sprintf("the run lease names %q, not this Job", holder)
		return v, nil
	}
	v.breakable = true
	return v, nil
}

// podOfJob reports whether pod is controlled by job (by UID), or, when the pod has no
// controller reference, labelled with its name.
func podOfJob(pod, job object) bool {
	if uid := pod.controllerUID(); uid != "" {
		return uid == job.uid()
	}
	l := pod.labels()
	return l[runnerapi.PodJobNameLabel] == job.name() || l[runnerapi.PodLegacyJobNameLabel] == job.name()
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown phase"
	}
	return s
}
