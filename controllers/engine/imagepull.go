package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

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
	return nil
}

// pullFailureEvent sends one Warning event ImagePullFailed when the running Job's pull failure
// is new: the condition did not say ImagePullFailed before this pass.
func (p *pass) pullFailureEvent() {
	f := p.ev.Jobs.PullFailure
	if f == nil || p.d.Action != decide.ActionWaitJob || len(p.ev.Jobs.Running) == 0 {
		return
	}
	run := p.ev.Jobs.Running[0]
	if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, decide.RunCondition(run)); c != nil && c.Reason == infrav1.ImagePullFailedReason {
		return
	}
	p.emit(corev1.EventTypeWarning, infrav1.ImagePullFailedReason, decide.PullFailureMessage(run.Name, f))
}
