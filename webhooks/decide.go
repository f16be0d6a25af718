package webhooks

import (
	"fmt"
	"strings"
	"time"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// JobState is what the API server says, right now, about one Job by name.
type JobState struct {
	// Name of the Job.
	Name string
	// Summary says whether it exists, finished, and which pods still run; its Runs is the
	// one rule of jobstatus. Pods are listed only when the Job is gone or finished (a Job that
	// has not finished runs whatever its pods do).
	jobstatus.Summary
	// Operation is the Job's captf.io/operation label ("" when unknown).
	Operation string
	// Since is when the Job started (status.startTime, else its creation time).
	Since time.Time
}

// Evidence is everything the guard decides on, read live for one request.
type Evidence struct {
	// Lease is the object's run lease as runlease judges it (Manager.RunEvidence).
	Lease runlease.Evidence
	// ActiveJob is the Job named by the old status.activeJob; nil when it named none.
	ActiveJob *JobState
	// Now is the time the evidence was read; Grace is the run lease grace (runlease.Options).
	Now   time.Time
	Grace time.Duration
}

// ObjectRef names the object of a request, for messages.
type ObjectRef struct {
	Kind, Namespace, Name string
}

func (o ObjectRef) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Verdict is the guard's answer to one request.
type Verdict struct {
	// Allowed is true when nothing the evidence shows forbids the change.
	Allowed bool
	// Blockers are short sentences naming what runs (empty when allowed).
	Blockers []string
	// StopJob names the running Job a user may delete to end the wait ("" when none runs).
	StopJob string
	// WaitForGrace: a lease inside the grace blocks; it frees by itself if no Job appears.
	WaitForGrace bool
}

// Message is the text of a denial: what the request does, what runs, what to do.
func (v Verdict) Message(obj ObjectRef, ch Change) string {
	return fmt.Sprintf("CAPTF guard: this request %s on %s, but %s. %s",
		ch.Describe(), obj, strings.Join(v.Blockers, "; and "), v.Advice(obj.Namespace))
}

// Advice says what to do about the blockers, with commands for namespace.
func (v Verdict) Advice(namespace string) string {
	var s string
	if v.StopJob != "" {
		s = fmt.Sprintf("CAPTF removes these marks itself once the Job has finished: wait for it (kubectl -n %s get job %s -w), "+
			"or stop it by deleting it (kubectl -n %s delete job %s --cascade=foreground); once its pods are gone the run lease frees and the removal is allowed.",
			namespace, v.StopJob, namespace, v.StopJob)
	}
	if v.WaitForGrace {
		if s != "" {
			s += " "
		}
		s += "Wait until that time: if no Job of that name appears, the lease frees and the removal is allowed."
	}
	return s + " In an incident, a member of an override group may force the removal by setting the annotation " +
		"captf.io/guard-override-reason in the same request (see docs/webhooks.md)."
}

// Decide judges a change against the evidence. It is pure: same inputs, same verdict.
//
//   - A change that removes nothing guarded is allowed.
//   - A Job named by the old status.activeJob that runs (or has a non-terminal pod) forbids it.
//   - A run lease that blocks (runlease.Evidence.Blocks: its holder runs or may still be
//     created) forbids it, with one exception: a change whose only guarded
//     part replaces status.activeJob with the lease's holder (the controller recording the Job
//     it just started after the previous one finished) keeps the evidence on the object.
func Decide(ch Change, ev Evidence) Verdict {
	if !ch.Guarded() {
		return Verdict{Allowed: true}
	}
	var blockers []string
	wait, stop := false, ""
	onlyReplacesWithHolder := !ch.BlockMoveRemoved && !ch.FinalizerRemoved && ch.ActiveJobReplaced() &&
		ch.NewActiveJob == ev.Lease.Holder
	described := ""
	if ev.Lease.Blocks() && !onlyReplacesWithHolder {
		l := ev.Lease
		switch {
		case l.HolderRuns() && l.Job != nil && l.Verdict.Reason == runlease.LiveHolderRunning:
			blockers = append(blockers, fmt.Sprintf("Job %s%s of this object runs (since %s): it holds run lease %s, taken at %s",
				l.Holder, opSuffix(string(l.Operation)), since(jobSince(l), ev.Now), l.LeaseName, since(l.AcquiredAt, ev.Now)))
			stop, described = l.Holder, l.Holder
		case l.HolderRuns():
			blockers = append(blockers, fmt.Sprintf("Job %s%s, holder of run lease %s (taken at %s), still has a pod that is not terminated",
				l.Holder, opSuffix(string(l.Operation)), l.LeaseName, since(l.AcquiredAt, ev.Now)))
			stop, described = l.Holder, l.Holder
		default: // MayStillBeCreated
			frees := l.AcquiredAt.Add(ev.Grace)
			blockers = append(blockers, fmt.Sprintf("run lease %s names Job %s%s, taken at %s, and that Job is not on the API server yet: it may still be created until %s, when the lease is %s old",
				l.LeaseName, l.Holder, opSuffix(string(l.Operation)), since(l.AcquiredAt, ev.Now), frees.UTC().Format(time.RFC3339), ev.Grace))
			wait = true
		}
	}
	if j := ev.ActiveJob; j != nil && j.Runs() && j.Name != described {
		var b string
		switch {
		case j.Found && !j.Finished:
			b = fmt.Sprintf("Job %s%s named by status.activeJob runs (since %s)", j.Name, opSuffix(j.Operation), since(j.Since, ev.Now))
		default:
			b = fmt.Sprintf("Job %s named by status.activeJob has finished or is gone, but its pod(s) %s are not terminated", j.Name, strings.Join(j.LivePods, ", "))
		}
		blockers = append(blockers, b)
		if stop == "" {
			stop = j.Name
		}
	}
	if len(blockers) == 0 {
		return Verdict{Allowed: true}
	}
	return Verdict{Blockers: blockers, StopJob: stop, WaitForGrace: wait}
}

func opSuffix(op string) string {
	if op == "" {
		return ""
	}
	return " (" + op + ")"
}

func jobSince(l runlease.Evidence) time.Time {
	if l.Job == nil {
		return l.AcquiredAt
	}
	if l.Job.Status.StartTime != nil {
		return l.Job.Status.StartTime.Time
	}
	return l.Job.CreationTimestamp.Time
}

// since formats t as RFC 3339 with its age, for example "2026-11-29T12:00:00Z, 42s ago".
func since(t, now time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	age := now.Sub(t).Truncate(time.Second)
	if age < 0 {
		age = 0
	}
	return fmt.Sprintf("%s, %s ago", t.UTC().Format(time.RFC3339), age)
}
