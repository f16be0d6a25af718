package jobstatus

import (
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// RunsTemplate reports whether pod runs exactly what job's pod template says: the same init
// containers and containers, in order, each with the same name, image, command, arguments,
// working folder, environment (env and envFrom) and volume mounts, and the same volumes. A
// controller owner reference is no proof that the Job controller made a pod: anyone who may
// create pods in the namespace can write one naming the Job's UID (the API server checks owner
// references only for blockOwnerDeletion). Such a pod that runs the template is a genuine run of
// the Job's own runner; one that runs anything else is not, so what its containers report (a
// Plan Job's result and the digests that bind its plan) is not trusted. Fields the pod gains
// outside the template (node, service account, resources a LimitRange sets, status) are not
// compared.
func RunsTemplate(pod *corev1.Pod, job *batchv1.Job) bool {
	t := &job.Spec.Template.Spec
	return sameContainers(pod.Spec.InitContainers, t.InitContainers) && sameContainers(pod.Spec.Containers, t.Containers) &&
		reflect.DeepEqual(volumesOf(pod.Spec.Volumes), volumesOf(t.Volumes))
}

// sameContainers compares what each container runs and sees.
func sameContainers(got, want []corev1.Container) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if g.Name != w.Name || g.Image != w.Image || g.WorkingDir != w.WorkingDir ||
			!reflect.DeepEqual(nilIfEmpty(g.Command), nilIfEmpty(w.Command)) || !reflect.DeepEqual(nilIfEmpty(g.Args), nilIfEmpty(w.Args)) ||
			!reflect.DeepEqual(g.Env, w.Env) && !(len(g.Env) == 0 && len(w.Env) == 0) ||
			!reflect.DeepEqual(g.EnvFrom, w.EnvFrom) && !(len(g.EnvFrom) == 0 && len(w.EnvFrom) == 0) ||
			!reflect.DeepEqual(g.VolumeMounts, w.VolumeMounts) && !(len(g.VolumeMounts) == 0 && len(w.VolumeMounts) == 0) ||
			!reflect.DeepEqual(g.RestartPolicy, w.RestartPolicy) {
			return false
		}
	}
	return true
}

// volumesOf maps volumes by name (nil for none).
func volumesOf(vs []corev1.Volume) map[string]corev1.VolumeSource {
	if len(vs) == 0 {
		return nil
	}
	out := make(map[string]corev1.VolumeSource, len(vs))
	for _, v := range vs {
		out[v.Name] = v.VolumeSource
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
