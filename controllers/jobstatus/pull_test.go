package jobstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func waitingPod(name string, phase corev1.PodPhase, init, main *corev1.ContainerStateWaiting) corev1.Pod {
	p := *objects.PodOf(objects.Job("ns", "j1").Obj(), name).Phase(phase).Obj()
	if init != nil {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "state-channel", Image: "manager:v1", State: corev1.ContainerState{Waiting: init}}}
	}
	if main != nil {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "terraform", Image: "reg/m:v1", State: corev1.ContainerState{Waiting: main}}}
	}
	return p
}

// TestPullFailureOf finds a container waiting for an image it cannot pull, in a pod that is
// not terminal, and keeps the registry's answer without the kubelet's back-off preamble.
func TestPullFailureOf(t *testing.T) {
	pull := &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `failed to pull image "reg/m:v1": UNAUTHORIZED`}
	backoff := &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "reg/m:v1": ErrImagePull: failed to pull image "reg/m:v1": UNAUTHORIZED`}
	creating := &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	for name, tc := range map[string]struct {
		pods          []corev1.Pod
		container     string
		reason, image string
	}{
		"none":                      {nil, "", "", ""},
		"creating is no failure":    {[]corev1.Pod{waitingPod("a", corev1.PodPending, nil, creating)}, "", "", ""},
		"a failed pull":             {[]corev1.Pod{waitingPod("a", corev1.PodPending, nil, pull)}, "terraform", "ErrImagePull", "reg/m:v1"},
		"a back-off":                {[]corev1.Pod{waitingPod("a", corev1.PodPending, nil, backoff)}, "terraform", "ImagePullBackOff", "reg/m:v1"},
		"an init container first":   {[]corev1.Pod{waitingPod("a", corev1.PodPending, pull, backoff)}, "state-channel", "ErrImagePull", "manager:v1"},
		"a terminal pod is skipped": {[]corev1.Pod{waitingPod("a", corev1.PodFailed, nil, pull)}, "", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := PullFailureOf(tc.pods)
			if tc.container == "" {
				if f != nil {
					t.Fatalf("got %+v, want none", f)
				}
				return
			}
			if f == nil || f.Container != tc.container || f.Reason != tc.reason || f.Image != tc.image {
				t.Fatalf("got %+v, want %s %s %s", f, tc.container, tc.reason, tc.image)
			}
			if f.Message != `failed to pull image "`+tc.image+`": UNAUTHORIZED` && tc.image == "reg/m:v1" {
				t.Fatalf("message %q, want the registry's answer without the back-off preamble", f.Message)
			}
		})
	}
}
