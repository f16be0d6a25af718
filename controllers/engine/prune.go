package engine

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// pruneHistory deletes the object's finished Jobs beyond its history limits, after the
// bookkeeping of counted moved the run sequence past them. Best effort: a Job left over is
// pruned after the next bookkeeping.
func pruneHistory(ctx context.Context, c client.Client, live client.Reader, s state.Subject, jobs []batchv1.Job, policy infrav1.JobPolicy, counted decide.JobView) {
	var cands []decide.HistoryCandidate
	for i := range jobs {
		j := &jobs[i]
		v, ok := viewOf(s, j)
		if !ok {
			continue
		}
		cands = append(cands, decide.HistoryCandidate{Name: j.Name, Seq: v.Seq, Operation: v.Operation, Foreign: v.Foreign,
			Finished: jobstatus.Finished(j), Succeeded: jobstatus.Succeeded(j), Counted: v.Seq <= counted.Seq})
	}
	keepSucceeded, keepFailed := policy.EffectiveJobsHistory()
	for _, name := range decide.JobsToPrune(cands, keepSucceeded, keepFailed) {
		if err := deleteFinishedJob(ctx, c, live, jobNamed(jobs, name)); err != nil {
			log.FromContext(ctx).Error(err, "prune a finished Job", "job", name)
		}
	}
}

// deleteFinishedJob deletes a finished Job whose pods, listed live, are all terminal, with a
// UID precondition (a Job re-created under that name meanwhile stays).
func deleteFinishedJob(ctx context.Context, c client.Client, live client.Reader, j *batchv1.Job) error {
	pods, err := jobstatus.ListPods(ctx, live, j.Namespace, j.Name)
	if err != nil {
		return err
	}
	if len(jobstatus.NonTerminal(pods)) > 0 {
		return nil // its pods still run: never pruned now
	}
	uid := j.UID
	err = c.Delete(ctx, j, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
