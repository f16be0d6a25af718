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

// StartBlock is why the running Job's pod has not started its main container
// (jobstatus.StartBlockOf): a configuration error, no node, volumes that cannot be mounted, or no
// pod at all.
type StartBlock struct {
	Pod, Container string
	// Reason is jobstatus's StartBlock reason (CreateContainerConfigError, CreateContainerError,
	// Unschedulable, ContainerCreating, NoPod).
	Reason string
	// Message is what the kubelet or the scheduler says.
	Message string
	// Since is when the block began as the pod shows it.
	Since time.Time
	// Immediate: a configuration error, which no wait heals.
	Immediate bool
}

// StartGrace is how long a pod may show a block that can heal by itself (no node yet, volumes
// not mounted yet, no pod yet) before it is reported: a normal start passes through each of
// them briefly. With PendingRequeue it reports a pod that cannot start within a minute.
const StartGrace = 45 * time.Second

// StartBlocked returns the running Job's start block once it counts: at once for a
// configuration error, after StartGrace for the others; nil otherwise.
func StartBlocked(ev Evidence) *StartBlock {
	b := ev.Jobs.StartBlock
	if b == nil || (!b.Immediate && ev.Now.Sub(b.Since) < StartGrace) {
		return nil
	}
	return b
}

// NeverStartedJobGoes reports whether a deleting object's running Job may be deleted before
// its deadline: it cannot start (an image that cannot be pulled, or a start block that counts)
// and the pods, read live this pass, prove that terraform never started (NeverStarted), so no
// state was touched and nothing would be lost. Without it a deletion waited out the Job's whole
// activeDeadlineSeconds (an hour by default). The deletion of the Job itself is safe whatever
// happens next: a pod that starts after all still holds the run lease and the marks until it is
// terminal, as any Job deleted by hand does.
func NeverStartedJobGoes(ev Evidence) bool {
	if !ev.Object.Deleting || len(ev.Jobs.Running) == 0 || !ev.Jobs.NeverStarted {
		return false
	}
	return ev.Jobs.PullFailure != nil || StartBlocked(ev) != nil
}

// setStartBlock reports a running Job whose pod cannot start on the condition of its operation:
// False, JobCannotStart, what blocks it. It reports whether it did.
func setStartBlock(c conditions, ev Evidence, run JobView) bool {
	b := StartBlocked(ev)
	if b == nil {
		return false
	}
	c.set(RunCondition(run), metav1.ConditionFalse, infrav1.JobCannotStartReason, StartBlockMessage(run.Name, b, ev.Object.Deleting))
	return true
}

// StartBlockMessage says which Job cannot start, what blocks it, and what heals it.
func StartBlockMessage(job string, b *StartBlock, deleting bool) string {
	msg := b.Message
	if len(msg) > maxPullMessage {
		msg = msg[:maxPullMessage] + "..."
	}
	var what string
	switch b.Reason {
	case "CreateContainerConfigError", "CreateContainerError":
		what = fmt.Sprintf("container %s of pod %s cannot be created (%s)", b.Container, b.Pod, b.Reason)
	case "Unschedulable":
		what = fmt.Sprintf("pod %s finds no node (Unschedulable)", b.Pod)
	case "NoPod":
		what = "the Job controller created no pod for it: a missing PriorityClass or ServiceAccount, or a quota (kubectl describe job " + job + " shows its FailedCreate events)"
	default:
		what = fmt.Sprintf("pod %s has started no container (%s): a volume it mounts may not exist (a module ConfigMap, a Secret; kubectl describe pod %s shows FailedMount events)", b.Pod, b.Reason, b.Pod)
	}
	if msg != "" {
		what += ": " + msg
	}
	next := "fix what it names and the Job runs; otherwise it fails at its activeDeadlineSeconds"
	if deleting {
		next = "no terraform ran, so the deletion removes the Job and goes on"
	}
	return fmt.Sprintf("Job %s cannot start: %s. %s", job, what, next)
}
