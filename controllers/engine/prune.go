package engine

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// historyLimits are the object's Job history limits (spec.job; defaults 1 and 1).
func (p *pass) historyLimits() (int, int) {
	j := p.obj.GetTerraformSpec().Job
	succeeded, failed := 1, 1
	if j.SuccessfulJobsHistory != nil {
		succeeded = int(*j.SuccessfulJobsHistory)
	}
	if j.FailedJobsHistory != nil {
		failed = int(*j.FailedJobsHistory)
	}
	return succeeded, failed
}

// pruneHistory deletes the object's finished Jobs beyond its history limits, after the
// bookkeeping of counted moved the run sequence past them. Best effort: a Job left over is
// pruned after the next bookkeeping.
func (p *pass) pruneHistory(ctx context.Context, counted decide.JobView) {
	var cands []decide.HistoryCandidate
	for i := range p.jobs {
		j := &p.jobs[i]
		v, ok := p.viewOf(j)
		if !ok {
			continue
		}
		cands = append(cands, decide.HistoryCandidate{Name: j.Name, Seq: v.Seq, Operation: v.Operation, Foreign: v.Foreign,
			Finished: jobstatus.Finished(j), Succeeded: jobstatus.Succeeded(j), Counted: v.Seq <= counted.Seq})
	}
	keepSucceeded, keepFailed := p.historyLimits()
	for _, name := range decide.JobsToPrune(cands, keepSucceeded, keepFailed) {
		if err := p.deleteFinishedJob(ctx, p.jobNamed(name)); err != nil {
			log.FromContext(ctx).Error(err, "prune a finished Job", "job", name)
		}
	}
}

// deleteFinishedJob deletes a finished Job whose pods, listed live, are all terminal, with a
// UID precondition (a Job re-created under that name meanwhile stays).
func (p *pass) deleteFinishedJob(ctx context.Context, j *batchv1.Job) error {
	pods, err := jobstatus.ListPods(ctx, p.r.APIReader, j.Namespace, j.Name)
	if err != nil {
		return err
	}
	if len(jobstatus.NonTerminal(pods)) > 0 {
		return nil // its pods still run: never pruned now
	}
	uid := j.UID
	err = p.r.Client.Delete(ctx, j, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
