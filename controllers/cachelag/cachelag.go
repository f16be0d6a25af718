package cachelag

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// Input is what Check needs.
type Input struct {
	// APIReader reads through the API server (never a cache).
	APIReader client.Reader
	// Leases supplies the lease rules and their options (grace, clock).
	Leases *runlease.Manager
	// Owner is the object whose pass is about to clear something.
	Owner runlease.Owner
	// ActiveJob is status.activeJob.name as the pass read it ("" when unset).
	ActiveJob string
	// Cached are the object's Jobs as the cache lists them and the pass's decision judges them
	// (the object's labels and one of its Job names, naming.JobName). A Job the decision does
	// not judge is no evidence of anything here, even when the cache lists it: status.activeJob
	// naming such a Job is read live like one the cache does not list.
	Cached []batchv1.Job
}

// Verdict is the answer of Check.
type Verdict struct {
	// Lag is true when a Job of the object runs, or may still be created, that the cache
	// does not show: the pass must wait.
	Lag bool
	// Pending: that Job is not on the API server yet; the run lease names it inside its grace
	// (decide.LagView.Pending says what a pass may still do).
	Pending bool
	// Job names that Job, and Reason says which check found it.
	Job    string
	Reason string
}

// Reasons a Check reports lag.
const (
	ReasonActiveJob  = "status.activeJob names a Job of this object that runs (read live) but the cache does not list"
	ReasonRunLease   = "the run lease names a Job of this object that runs, and the cache does not list it"
	ReasonLeaseGrace = "the run lease names a Job that is not on the API server yet but may still be created (the lease is inside its grace)"
)

// Check runs the two live checks. Call it only when its answer can change what the pass does
// (decide.NeedsLagCheck): each call costs up to a few live reads.
func Check(ctx context.Context, in Input) (Verdict, error) {
	cached := map[string]bool{}
	for i := range in.Cached {
		cached[in.Cached[i].Name] = true
	}
	if in.ActiveJob != "" && !cached[in.ActiveJob] {
		// Judge the Job by itself, read live: whether it runs (jobstatus), and whose it is (its
		// controller owner reference, which the Job guard protects: jobstatus.ControlledByObject),
		// never by whether the label-scoped cache lists it. So a Job whose labels were edited neither clears the marks
		// early nor holds the object after it ended.
		live, err := jobstatus.Read(ctx, in.APIReader, in.Owner.Namespace, in.ActiveJob, nil)
		if err != nil {
			return Verdict{}, fmt.Errorf("read active job %s: %w", in.ActiveJob, err)
		}
		if live.Runs() && (live.Job == nil || jobstatus.ControlledByObject(live.Job, in.Owner.Kind, in.Owner.Name)) {
			lagTotal.WithLabelValues("activeJob").Inc()
			return Verdict{Lag: true, Job: in.ActiveJob, Reason: ReasonActiveJob}, nil
		}
	}

	ev, err := in.Leases.RunEvidence(ctx, in.Owner)
	if err != nil {
		return Verdict{}, fmt.Errorf("run lease evidence: %w", err)
	}
	if !ev.Blocks() {
		return Verdict{}, nil
	}
	if ev.MayStillBeCreated() {
		// The holder is not on the API server yet, but the lease is inside its grace: the pass
		// that took it (another manager, or this one before a restart) may have written
		// block-move already and be about to create the Job. A clear now would let that Job
		// run unmarked (the soak's seed 1495: a second manager cleared block-move of an object
		// paused in between, 150 ms before the first created its drift Job). Wait for the Job
		// or for the grace to pass, as the admission guard does.
		lagTotal.WithLabelValues("runLease").Inc()
		return Verdict{Lag: true, Pending: true, Job: ev.Holder, Reason: ReasonLeaseGrace}, nil
	}
	// The holder runs: lag only when the cache does not show it and it is a Job of this object
	// (or only its pods are left). A running Job of another object in this lease is evidence
	// of nothing here.
	if cached[ev.Holder] || (ev.Job != nil && !ev.JobOfOwner) {
		return Verdict{}, nil
	}
	lagTotal.WithLabelValues("runLease").Inc()
	return Verdict{Lag: true, Job: ev.Holder, Reason: ReasonRunLease + " (" + string(ev.Verdict.Reason) + ")"}, nil
}
