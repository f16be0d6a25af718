package jobstatus

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestRunsTemplate: a pod runs its Job's template when its containers, init containers and
// volumes are the template's; what the pod gains elsewhere (node, service account, resources)
// does not count, and any change of what runs or what it sees does.
func TestRunsTemplate(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	job := objects.Job("ns", "j1").With(func(j *batchv1.Job) {
		j.Spec.Template.Spec = corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "state-channel", Image: "captf/manager:v1", Args: []string{"channel"}, RestartPolicy: &always}},
			Containers: []corev1.Container{{Name: "terraform", Image: "captf/tofu:v1", Command: []string{"/captf/runner"}, Args: []string{"run", "--operation=Plan"},
				Env:          []corev1.EnvVar{{Name: "TF_IN_AUTOMATION", Value: "1"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "inputs", MountPath: "/captf/inputs", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "inputs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "j1-inputs"}}}},
		}
	}).Obj()
	for name, tc := range map[string]struct {
		mut  func(s *corev1.PodSpec)
		want bool
	}{
		"the template itself": {func(*corev1.PodSpec) {}, true},
		"what the pod gains elsewhere": {func(s *corev1.PodSpec) {
			s.NodeName, s.ServiceAccountName = "node-1", "default"
			s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, true},
		"another image":         {func(s *corev1.PodSpec) { s.Containers[0].Image = "tenant/forger:v1" }, false},
		"another command":       {func(s *corev1.PodSpec) { s.Containers[0].Command = []string{"/bin/sh"} }, false},
		"other arguments":       {func(s *corev1.PodSpec) { s.Containers[0].Args = []string{"run", "--operation=Apply"} }, false},
		"another environment":   {func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "0" }, false},
		"another mount":         {func(s *corev1.PodSpec) { s.Containers[0].VolumeMounts[0].MountPath = "/tmp" }, false},
		"an extra container":    {func(s *corev1.PodSpec) { s.Containers = append(s.Containers, corev1.Container{Name: "x", Image: "x"}) }, false},
		"no channel":            {func(s *corev1.PodSpec) { s.InitContainers = nil }, false},
		"another channel image": {func(s *corev1.PodSpec) { s.InitContainers[0].Image = "tenant/channel:v1" }, false},
		"another volume source": {func(s *corev1.PodSpec) { s.Volumes[0].Secret.SecretName = "forged-inputs" }, false},
		"an extra volume": {func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			pod := objects.PodOf(job, "j1-a").AsBuilt().Obj()
			tc.mut(&pod.Spec)
			if got := RunsTemplate(pod, job); got != tc.want {
				t.Fatalf("RunsTemplate = %v, want %v", got, tc.want)
			}
		})
	}
}
