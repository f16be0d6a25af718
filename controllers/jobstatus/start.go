package jobstatus

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Why a running Job's pod has not started its containers (StartBlock.Reason). The first two are
// a kubelet's container waiting reasons; the others name what the pod shows.
const (
	// StartBlockConfigError: the kubelet cannot build a container's configuration: an env
	// variable names a Secret or ConfigMap (or a key of one) that does not exist.
	StartBlockConfigError = "CreateContainerConfigError"
	// StartBlockCreateError: the container runtime refused to create the container.
	StartBlockCreateError = "CreateContainerError"
	// StartBlockUnschedulable: the scheduler finds no node for the pod (PodScheduled False,
	// reason Unschedulable).
	StartBlockUnschedulable = "Unschedulable"
	// StartBlockContainerCreating: the pod is on a node and none of its containers started: its
	// volumes cannot be mounted (a missing ConfigMap or Secret volume), or the node is slow.
	StartBlockContainerCreating = "ContainerCreating"
	// StartBlockNoPod: the Job has no pod at all: the Job controller cannot create it (a
	// missing PriorityClass or ServiceAccount, a quota; its FailedCreate events say which).
	StartBlockNoPod = "NoPod"
)

// StartBlock is why a running Job's pod has not started: what the pod (or its absence) shows,
// and since when. It is a fact, not a verdict: how long a block may last before it is reported
// is decided by the caller (controllers/decide).
type StartBlock struct {
	// Pod and Container name where the block shows ("" when it is not one container's).
	Pod, Container string
	// Reason is one of the StartBlock* constants.
	Reason string
	// Message is what the kubelet or the scheduler says, when it says anything.
	Message string
	// Since is when the block began as far as the pod shows: the scheduling condition's
	// transition, else the pod's (or, with no pod, the Job's) creation.
	Since time.Time
}

// Immediate reports a block that no wait heals by itself: the kubelet retries a
// configuration error at once and fails the same way until someone fixes the reference.
func (b *StartBlock) Immediate() bool {
	return b.Reason == StartBlockConfigError || b.Reason == StartBlockCreateError
}

// StartBlockOf returns why the pods of a running Job have not started, or nil when one of them
// started a main container (or is terminal: a finished pod is the Job's outcome, not a block)
// or nothing blocks yet. jobCreated is the Job's creation time, the start of a NoPod block. Pods
// are judged in name order; a container's configuration error comes before the pod-level
// reasons, because it names what to fix.
func StartBlockOf(pods []corev1.Pod, jobCreated time.Time) *StartBlock {
	if len(pods) == 0 {
		return &StartBlock{Reason: StartBlockNoPod, Since: jobCreated}
	}
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if PodTerminal(&pods[i]) || mainStarted(&pods[i]) {
			return nil
		}
		sorted = append(sorted, &pods[i])
	}
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if w := cs.State.Waiting; w != nil && (w.Reason == StartBlockConfigError || w.Reason == StartBlockCreateError) {
				return &StartBlock{Pod: p.Name, Container: cs.Name, Reason: w.Reason, Message: w.Message, Since: p.CreationTimestamp.Time}
			}
		}
	}
	p := sorted[0]
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &StartBlock{Pod: p.Name, Reason: StartBlockUnschedulable, Message: c.Message, Since: c.LastTransitionTime.Time}
		}
	}
	if p.Spec.NodeName == "" || anyStarted(p) {
		// Not scheduled yet and the scheduler has not said why, or an init container (the state
		// channel, the module's copy) runs or ran: nothing blocks yet.
		return nil
	}
	b := &StartBlock{Pod: p.Name, Reason: StartBlockContainerCreating, Since: p.CreationTimestamp.Time}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			b.Since = c.LastTransitionTime.Time
		}
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Message != "" {
			b.Container, b.Message = cs.Name, w.Message
			break
		}
	}
	return b
}

// NoContainerStarted reports whether the pods prove that terraform never started: every pod is
// Pending and none of its main containers (spec.containers, where the runner and terraform run)
// runs, has terminated, has a last termination state or reports started. Init containers (the
// state channel, which writes only what terraform sends it) may have run. With no pod at all it
// is true. It is the
// evidence that lets a deletion remove a Job that never ran terraform (no state was touched),
// as the lock breaker removes only the lock of a pod that is gone or terminal.
func NoContainerStarted(pods []corev1.Pod) bool {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodPending || mainStarted(p) {
			return false
		}
	}
	return true
}

// mainStarted reports a pod whose main containers include one that runs, ran, or reports
// started.
func mainStarted(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.ContainerStatuses, containerStarted)
}

// anyStarted reports a pod with any container, init containers included, that started.
func anyStarted(p *corev1.Pod) bool {
	return mainStarted(p) || slices.ContainsFunc(p.Status.InitContainerStatuses, containerStarted)
}

// containerStarted reports a container that runs, ran, or reports started.
func containerStarted(cs corev1.ContainerStatus) bool {
	return cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Running != nil ||
		cs.LastTerminationState.Terminated != nil || (cs.Started != nil && *cs.Started)
}
