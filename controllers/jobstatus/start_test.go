package jobstatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestStartBlockOf reads why a running Job's pods have not started: a container configuration
// error first, then the scheduler's Unschedulable, then a scheduled pod that started no
// container; no pod at all is NoPod since the Job's creation. A pod whose main container
// started, or a terminal pod, is no block; an init container that runs (the state channel)
// hides only the ContainerCreating block, not a main container's configuration error.
func TestStartBlockOf(t *testing.T) {
	created := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	scheduledAt := metav1.NewTime(created.Add(5 * time.Second))
	pod := func(mut func(p *corev1.Pod)) corev1.Pod {
		return *objects.PodOf(objects.Job("ns", "j1").Obj(), "j1-a").Phase(corev1.PodPending).With(func(p *corev1.Pod) {
			p.CreationTimestamp = metav1.NewTime(created)
			p.Spec.NodeName = "node"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduledAt}}
		}).With(mut).Obj()
	}
	waiting := func(reason, msg string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "terraform", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
	channelRuns := []corev1.ContainerStatus{{Name: "state-channel", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	for name, tc := range map[string]struct {
		pods           []corev1.Pod
		reason         string
		since          time.Time
		neverStarted   bool
		containerNamed string
	}{
		"no pod": {nil, StartBlockNoPod, created, true, ""},
		"a config error": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = waiting("CreateContainerConfigError", `secret "s" not found`)
		})}, StartBlockConfigError, created, true, "terraform"},
		"a config error beside a running channel": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses, p.Status.ContainerStatuses = channelRuns, waiting("CreateContainerConfigError", "x")
		})}, StartBlockConfigError, created, true, "terraform"},
		"volumes not mounted": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = waiting("ContainerCreating", `configmap "m" not found`)
		})}, StartBlockContainerCreating, scheduledAt.Time, true, "terraform"},
		"no container status yet": {[]corev1.Pod{pod(func(p *corev1.Pod) {})}, StartBlockContainerCreating, scheduledAt.Time, true, ""},
		"unschedulable": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: scheduledAt}}
		})}, StartBlockUnschedulable, scheduledAt.Time, true, ""},
		"not scheduled, nothing said": {[]corev1.Pod{pod(func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Conditions = "", nil })}, "", time.Time{}, true, ""},
		"an init container runs":      {[]corev1.Pod{pod(func(p *corev1.Pod) { p.Status.InitContainerStatuses = channelRuns })}, "", time.Time{}, true, ""},
		"the main container runs": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "terraform", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})}, "", time.Time{}, false, ""},
		"the main container ran before (a restart)": {[]corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = waiting("CreateContainerConfigError", "x")
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
		})}, "", time.Time{}, false, ""},
		"a terminal pod": {[]corev1.Pod{pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, "", time.Time{}, false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			b := StartBlockOf(tc.pods, created)
			switch {
			case tc.reason == "" && b != nil:
				t.Fatalf("block %+v, want none", b)
			case tc.reason != "" && b == nil:
				t.Fatalf("no block, want %s", tc.reason)
			case b != nil && (b.Reason != tc.reason || !b.Since.Equal(tc.since) || b.Container != tc.containerNamed):
				t.Fatalf("block %+v, want reason %s since %s container %q", b, tc.reason, tc.since, tc.containerNamed)
			}
			if got := NoContainerStarted(tc.pods); got != tc.neverStarted {
				t.Fatalf("NoContainerStarted = %v, want %v", got, tc.neverStarted)
			}
		})
	}
}
