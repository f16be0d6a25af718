package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// gatherPendingPods lists the running Job's pods live when the Job counts no ready pod
// (decide.NeedsPendingPods), and records a container that waits for an image the kubelet
// cannot pull. A Job whose pod is ready reads nothing.
func (p *pass) gatherPendingPods(ctx context.Context) error {
	if !decide.NeedsPendingPods(p.ev) {
		return nil
	}
	pods, err := jobstatus.ListPods(ctx, p.r.APIReader, p.obj.GetNamespace(), p.ev.Jobs.Running[0].Name)
	if err != nil {
		return fmt.Errorf("list pods of a pending job: %w", err)
	}
	if f := jobstatus.PullFailureOf(pods); f != nil {
		p.ev.Jobs.PullFailure = &decide.PullFailure{Pod: f.Pod, Container: f.Container, Image: f.Image, Reason: f.Reason, Message: f.Message}
	}
	run := p.ev.Jobs.Running[0].Name
	var created time.Time
	if j := p.jobNamed(run); j != nil {
		created = j.CreationTimestamp.Time
	}
	if b := jobstatus.StartBlockOf(pods, created); b != nil {
		p.ev.Jobs.StartBlock = &decide.StartBlock{Pod: b.Pod, Container: b.Container, Reason: b.Reason, Message: b.Message, Since: b.Since, Immediate: b.Immediate()}
	}
	p.ev.Jobs.NeverStarted = jobstatus.NoContainerStarted(pods)
	return nil
}

// startBlockEvent sends one Warning event JobCannotStart when the running Job's start block
// counts (decide.StartBlocked) and is new: the condition did not say JobCannotStart before this
// pass. A pull failure has its own event (pullFailureEvent).
func (p *pass) startBlockEvent() {
	if len(p.ev.Jobs.Running) == 0 || p.ev.Jobs.PullFailure != nil || (p.d.Action != decide.ActionWaitJob && p.d.Action != decide.ActionDeleteJob) {
		return
	}
	b := decide.StartBlocked(p.ev)
	if b == nil {
		return
	}
	run := p.ev.Jobs.Running[0]
	if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, decide.RunCondition(run)); c != nil && c.Reason == infrav1.JobCannotStartReason {
		return
	}
	p.emit(corev1.EventTypeWarning, infrav1.JobCannotStartReason, decide.StartBlockMessage(run.Name, b, p.ev.Object.Deleting))
}

// deleteNeverStartedJob deletes a deleting object's running Job that can never start and whose
// pods proved that terraform never started (decide.ActionDeleteJob), with a precondition on the
// Job's UID so a Job re-created under the name is never deleted. The marks stay: the next pass
// sees the Job gone and waits for its pods like for any deleted Job.
func (p *pass) deleteNeverStartedJob(ctx context.Context) (ctrl.Result, error) {
	run := p.ev.Jobs.Running[0]
	j := p.jobNamed(run.Name)
	if j == nil {
		return ctrl.Result{RequeueAfter: decide.PendingRequeue}, nil
	}
	uid := j.UID
	err := p.r.Client.Delete(ctx, j, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete job %s that never started: %w", run.Name, err)
	}
	log.FromContext(ctx).Info("deleted a Job that cannot start and never ran terraform, so the deletion goes on", "job", run.Name)
	p.emit(corev1.EventTypeNormal, "NeverStartedJobDeleted", fmt.Sprintf("Job %s (%s) could not start and never ran terraform: deleted so the deletion goes on", run.Name, run.Operation))
	return ctrl.Result{RequeueAfter: decide.PendingRequeue}, nil
}

// pullFailureEvent sends one Warning event ImagePullFailed when the running Job's pull failure
// is new: the condition did not say ImagePullFailed before this pass.
func (p *pass) pullFailureEvent() {
	f := p.ev.Jobs.PullFailure
	if f == nil || (p.d.Action != decide.ActionWaitJob && p.d.Action != decide.ActionDeleteJob) || len(p.ev.Jobs.Running) == 0 {
		return
	}
	run := p.ev.Jobs.Running[0]
	if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, decide.RunCondition(run)); c != nil && c.Reason == infrav1.ImagePullFailedReason {
		return
	}
	p.emit(corev1.EventTypeWarning, infrav1.ImagePullFailedReason, decide.PullFailureMessage(run.Name, f))
}
