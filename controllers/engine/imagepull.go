package engine

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// gatherPendingPods lists the running Job's pods live when the Job counts no ready pod
// (decide.NeedsPendingPods), and records a container that waits for an image the kubelet
// cannot pull. A Job whose pod is ready reads nothing.
func gatherPendingPods(ctx context.Context, live client.Reader, namespace string, jobs []batchv1.Job, ev *decide.JobsEvidence) error {
	run := ev.Running[0].Name
	pods, err := jobstatus.ListPods(ctx, live, namespace, run)
	if err != nil {
		return fmt.Errorf("list pods of a pending job: %w", err)
	}
	if f := jobstatus.PullFailureOf(pods); f != nil {
		ev.PullFailure = &decide.PullFailure{Pod: f.Pod, Container: f.Container, Image: f.Image, Reason: f.Reason, Message: f.Message}
	}
	var created time.Time
	if j := jobNamed(jobs, run); j != nil {
		created = j.CreationTimestamp.Time
	}
	if b := jobstatus.StartBlockOf(pods, created); b != nil {
		ev.StartBlock = &decide.StartBlock{Pod: b.Pod, Container: b.Container, Reason: b.Reason, Message: b.Message, Since: b.Since, Immediate: b.Immediate()}
	}
	ev.NeverStarted = jobstatus.NoContainerStarted(pods)
	return nil
}

// deleteNeverStartedJob deletes a deleting object's running Job that can never start and whose
// pods proved that terraform never started (decide.ActionDeleteJob), with a precondition on the
// Job's UID so a Job re-created under the name is never deleted. The marks stay: the next pass
// sees the Job gone and waits for its pods like for any deleted Job.
func deleteNeverStartedJob(ctx context.Context, c client.Client, run decide.JobView, jobs []batchv1.Job, out *outbox) (ctrl.Result, error) {
	j := jobNamed(jobs, run.Name)
	if j == nil {
		return ctrl.Result{RequeueAfter: decide.PendingRequeue}, nil
	}
	uid := j.UID
	err := c.Delete(ctx, j, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete job %s that never started: %w", run.Name, err)
	}
	log.FromContext(ctx).Info("deleted a Job that cannot start and never ran terraform, so the deletion goes on", "job", run.Name)
	out.add(corev1.EventTypeNormal, "NeverStartedJobDeleted", fmt.Sprintf("Job %s (%s) could not start and never ran terraform: deleted so the deletion goes on", run.Name, run.Operation))
	return ctrl.Result{RequeueAfter: decide.PendingRequeue}, nil
}
