package jobstatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PullFailure is why a pod of a Job cannot start: one of its containers waits for an image the
// kubelet cannot pull.
type PullFailure struct {
	Pod, Container, Image string
	// Reason is the container's waiting reason (ErrImagePull, ImagePullBackOff, ...).
	Reason string
	// Message is the kubelet's message without its back-off preamble: the registry's answer.
	Message string
}

// IsPullFailureReason reports whether a container's waiting reason says its image cannot be
// pulled, as a kubelet words it.
func IsPullFailureReason(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// PullFailureOf returns the first container of the non-terminal pods (by name; init
// containers first, in order) that waits for an image it cannot pull; nil when none does.
func PullFailureOf(pods []corev1.Pod) *PullFailure {
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if !PodTerminal(&pods[i]) {
			sorted = append(sorted, &pods[i])
		}
	}
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			w := cs.State.Waiting
			if w == nil || !IsPullFailureReason(w.Reason) {
				continue
			}
			return &PullFailure{Pod: p.Name, Container: cs.Name, Image: cs.Image, Reason: w.Reason, Message: pullMessage(cs.Image, w.Message)}
		}
	}
	return nil
}

// pullMessage drops the preamble a kubelet puts before the last pull error while it backs off
// (Back-off pulling image "<image>": ErrImagePull: <error>), so the message stays the same
// between a failed pull and the back-off after it.
func pullMessage(image, msg string) string {
	if rest, ok := strings.CutPrefix(msg, fmt.Sprintf("Back-off pulling image %q", image)); ok {
		rest = strings.TrimPrefix(rest, ": ")
		rest = strings.TrimPrefix(rest, "ErrImagePull: ")
		if rest != "" {
			return rest
		}
	}
	return msg
}
