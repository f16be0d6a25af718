package decide

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// PullFailure is a container of the running Job's pod that waits for an image the kubelet
// cannot pull (jobstatus.PullFailureOf).
type PullFailure struct {
	Pod, Container, Image, Reason string
	// Message is the registry's answer, as the kubelet reports it.
	Message string
}

// PendingRequeue is how soon a pass looks again at a running Job whose pod is not ready: pods
// are not watched, and a pod waiting for its image changes no Job.
const PendingRequeue = 10 * time.Second

// maxPullMessage bounds the registry's answer in a condition message.
const maxPullMessage = 1024

// NeedsPendingPods reports whether the pass must list the running Job's pods live: the Job
// counts no ready pod, so its pod may wait for an image it cannot pull. A Job whose pod runs
// (ready) reads nothing.
func NeedsPendingPods(ev Evidence) bool {
	return ev.Object.HasFinalizer && len(ev.Jobs.Running) > 0 && ev.Jobs.Running[0].Unready
}

// pendingWait is the wait of a pass that waits for a running Job: while its pod is not
// ready, look again after PendingRequeue (a pull that fails now, or heals, changes nothing
// the manager watches). Nothing is cleared or deleted: the Job keeps its run lease and the
// kubelet keeps pulling.
func pendingWait(ev Evidence) *Wait {
	if !NeedsPendingPods(ev) {
		return nil
	}
	return &Wait{Reason: infrav1.JobRunningReason, RequeueAfter: PendingRequeue}
}

// setPullFailure reports a running Job whose pod cannot pull an image on the condition of its
// operation: False, ImagePullFailed, the registry's answer. It reports whether it did.
func setPullFailure(c conditions, ev Evidence, run JobView) bool {
	f := ev.Jobs.PullFailure
	if f == nil {
		return false
	}
	c.set(RunCondition(run), metav1.ConditionFalse, infrav1.ImagePullFailedReason, PullFailureMessage(run.Name, f))
	return true
}

// RunCondition is the condition that reports a Job of the object while it runs.
func RunCondition(run JobView) string { return familyOfRun(run.Operation, run.RefreshOnly) }

// PullFailureMessage says which Job cannot start, why, and what heals it.
func PullFailureMessage(job string, f *PullFailure) string {
	msg := f.Message
	if len(msg) > maxPullMessage {
		msg = msg[:maxPullMessage] + "..."
	}
	return fmt.Sprintf("Job %s cannot start: the image %s of container %s cannot be pulled (%s): %s. The node pulls again: fix the pull secret or the image and the Job runs; otherwise it fails at its activeDeadlineSeconds",
		job, f.Image, f.Container, f.Reason, msg)
}
