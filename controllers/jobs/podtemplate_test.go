package jobs

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// podTemplateFamilies set one field family of spec.job.podTemplate each; every family has
// its golden Job in testdata/podtemplate-<family>.yaml.
var podTemplateFamilies = map[string]func(*infrav1.RunnerPodTemplate){
	"nodeselector": func(t *infrav1.RunnerPodTemplate) {
		t.NodeSelector = map[string]string{"node-role.example.com/infra": "", "topology.kubernetes.io/zone": "eu-west-1a"}
	},
	"tolerations": func(t *infrav1.RunnerPodTemplate) {
		t.Tolerations = []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "terraform", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		}
	},
	"affinity": func(t *infrav1.RunnerPodTemplate) {
		t.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}}}}}}}}
	},
	"priorityclass": func(t *infrav1.RunnerPodTemplate) { t.PriorityClassName = "infra-critical" },
	"imagepullsecrets": func(t *infrav1.RunnerPodTemplate) {
		t.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-credentials"}}
	},
	"metadata": func(t *infrav1.RunnerPodTemplate) {
		t.Metadata = infrav1.RunnerPodMetadata{
			Labels:      map[string]string{"team": "platform", "cost-center": "infra"},
			Annotations: map[string]string{"example.com/audit": "runner", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
		}
	},
	"volumes": func(t *infrav1.RunnerPodTemplate) {
		t.Volumes = []infrav1.RunnerVolume{
			{Name: "ca-bundle", MountPath: "/etc/ssl/custom", ConfigMap: &infrav1.RunnerVolumeSource{Name: "corporate-ca",
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.pem"}}}},
			{Name: "registry-token", MountPath: "/var/run/secrets/registry", Secret: &infrav1.RunnerVolumeSource{Name: "registry-token"}},
		}
	},
}

func podTemplateParams(family string) Params {
	p := imageParams(infrav1.OperationApply)
	p.Spec.Job.PodTemplate = &infrav1.RunnerPodTemplate{}
	podTemplateFamilies[family](p.Spec.Job.PodTemplate)
	return p
}

func TestGoldenPodTemplateJobs(t *testing.T) {
	for family := range podTemplateFamilies {
		t.Run(family, func(t *testing.T) { golden(t, "podtemplate-"+family, podTemplateParams(family)) })
	}
}

// A pod template changes where the pod runs and what the main container reads; never the
// safety settings, the credentials, CAPTF's labels, or the other containers' mounts.
func TestPodTemplateKeepsTheGuarantees(t *testing.T) {
	p := imageParams(infrav1.OperationApply)
	p.Spec.Job.PodTemplate = &infrav1.RunnerPodTemplate{}
	for _, set := range podTemplateFamilies {
		set(p.Spec.Job.PodTemplate)
	}
	job, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	checkCredentials(t, p, job)
	pod := job.Spec.Template.Spec
	if pod.NodeSelector["topology.kubernetes.io/zone"] != "eu-west-1a" || len(pod.Tolerations) != 2 || pod.Affinity == nil ||
		pod.PriorityClassName != "infra-critical" || len(pod.ImagePullSecrets) != 1 {
		t.Errorf("placement not applied: %+v", pod)
	}
	meta := job.Spec.Template.ObjectMeta
	if meta.Labels["team"] != "platform" || meta.Labels[infrav1.OperationLabel] != "Apply" || meta.Annotations[DefaultContainerAnnotation] != MainContainer ||
		meta.Annotations["example.com/audit"] != "runner" {
		t.Errorf("pod metadata: %v %v", meta.Labels, meta.Annotations)
	}
	if _, ok := job.Labels["team"]; ok {
		t.Errorf("the template's labels belong on the pod, not the Job: %v", job.Labels)
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name != "ca-bundle" && m.Name != "registry-token" {
				continue
			}
			if c.Name != MainContainer || !m.ReadOnly {
				t.Errorf("%s mounts %s (read-only %v): only the main container may, read-only", c.Name, m.Name, m.ReadOnly)
			}
		}
	}
	mounted := map[string]bool{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted[m.MountPath] = true
	}
	if !mounted["/etc/ssl/custom"] || !mounted["/var/run/secrets/registry"] {
		t.Errorf("main container mounts %v", mounted)
	}
}

func TestReservedMountPathsCoverRunnerDirs(t *testing.T) {
	for _, dir := range []string{runnerapi.InputsDir, runnerapi.ModuleDir, runnerapi.WorkDir, runnerapi.BinDir, runnerapi.ChannelDir,
		runnerapi.ServiceAccountDir, runnerapi.IdentityDir, runnerapi.TerminationLog} {
		if reservedMountPath(dir) == "" {
			t.Errorf("%s is not reserved", dir)
		}
	}
	job, err := Build(imageParams(infrav1.OperationApply))
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if !strings.HasPrefix(v.Name, ReservedVolumePrefix) && !contains(ReservedVolumeNames, v.Name) {
			t.Errorf("volume %s of a Job is not reserved", v.Name)
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if reservedMountPath(m.MountPath) == "" {
				t.Errorf("%s mounts %s, which is not reserved", c.Name, m.MountPath)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cmVolume(name, mountPath string) infrav1.RunnerVolume {
	return infrav1.RunnerVolume{Name: name, MountPath: mountPath, ConfigMap: &infrav1.RunnerVolumeSource{Name: "ca"}}
}

// TestValidatePodTemplate is the admission rule of spec.job.podTemplate, which Build applies
// too: each refusal at its field, with a message that says what to do.
func TestValidatePodTemplate(t *testing.T) {
	refused := map[string]struct {
		tmpl       infrav1.RunnerPodTemplate
		field, msg string
	}{
		"captf label":                  {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"captf.io/managed": "false"}}}, "metadata.labels[captf.io/managed]", "choose a key"},
		"captf subdomain label":        {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"x.captf.io/a": "b"}}}, "metadata.labels[x.captf.io/a]", "is CAPTF's"},
		"operation label":              {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{infrav1.OperationLabel: "Destroy"}}}, "metadata.labels[captf.io/operation]", "is CAPTF's"},
		"cluster label":                {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{infrav1.ClusterNameLabel: "other"}}}, "metadata.labels[cluster.x-k8s.io/cluster-name]", "is CAPTF's"},
		"shard label":                  {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{infrav1.WatchFilterLabel: "s2"}}}, "metadata.labels[cluster.x-k8s.io/watch-filter]", "is CAPTF's"},
		"job controller label":         {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"batch.kubernetes.io/job-name": "x"}}}, "metadata.labels[batch.kubernetes.io/job-name]", "Job controller"},
		"job-name label":               {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"job-name": "x"}}}, "metadata.labels[job-name]", "Job controller"},
		"bad label value":              {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"team": "a b"}}}, "metadata.labels", "a valid label"},
		"captf annotation":             {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{infrav1.InputsHashAnnotation: "x"}}}, "metadata.annotations[captf.io/inputs-hash]", "choose a key"},
		"apparmor annotation":          {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/terraform": "unconfined"}}}, "metadata.annotations[container.apparmor.security.beta.kubernetes.io/terraform]", "loosen; remove it"},
		"seccomp annotation":           {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}}, "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]", "AppArmor or seccomp profile"},
		"default container":            {infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{DefaultContainerAnnotation: "state-channel"}}}, "metadata.annotations[kubectl.kubernetes.io/default-container]", "choose a key"},
		"volume named like CAPTF's":    {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("work", "/etc/x")}}, "volumes[0].name", "rename the volume"},
		"captf- volume name":           {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("captf-ca", "/etc/x")}}, "volumes[0].name", "rename the volume"},
		"duplicate volume name":        {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/etc/x"), cmVolume("ca", "/etc/y")}}, "volumes[1].name", "Duplicate"},
		"mount at a CAPTF folder":      {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", runnerapi.InputsDir)}}, "volumes[0].mountPath", "mount the volume elsewhere"},
		"mount under /captf":           {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/captf/work/providers")}}, "volumes[0].mountPath", "under or above /captf"},
		"mount above /captf":           {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/")}}, "volumes[0].mountPath", "mount the volume elsewhere"},
		"mount above the identity":     {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/var/run/secrets")}}, "volumes[0].mountPath", "/var/run/secrets/captf.io"},
		"mount at the default token":   {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/var/run/secrets/kubernetes.io/serviceaccount")}}, "volumes[0].mountPath", "/var/run/secrets/kubernetes.io"},
		"mount at the termination log": {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/dev")}}, "volumes[0].mountPath", "/dev/termination-log"},
		"relative mount":               {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "etc/ssl")}}, "volumes[0].mountPath", "absolute, clean"},
		"mount with ..":                {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/etc/../captf")}}, "volumes[0].mountPath", "absolute, clean"},
		"duplicate mount":              {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{cmVolume("a", "/etc/x"), cmVolume("b", "/etc/x")}}, "volumes[1].mountPath", "Duplicate"},
		"item path escapes": {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{{Name: "ca", MountPath: "/etc/x",
			Secret: &infrav1.RunnerVolumeSource{Name: "s", Items: []corev1.KeyToPath{{Key: "k", Path: "../../captf/inputs/x"}}}}}}, "volumes[0].secret.items[0].path", "relative file path"},
		"both sources": {infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{{Name: "ca", MountPath: "/etc/x",
			ConfigMap: &infrav1.RunnerVolumeSource{Name: "a"}, Secret: &infrav1.RunnerVolumeSource{Name: "b"}}}}, "volumes[0]", "exactly one"},
	}
	base := field.NewPath("spec", "job", "podTemplate")
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			errs := ValidatePodTemplate(base, &c.tmpl)
			want := base.String() + "." + c.field
			for _, e := range errs {
				if e.Field == want && strings.Contains(e.Error(), c.msg) {
					return
				}
			}
			t.Fatalf("no error at %s containing %q: %v", want, c.msg, errs)
		})
		p := imageParams(infrav1.OperationApply)
		p.Spec.Job.PodTemplate = c.tmpl.DeepCopy()
		if _, err := Build(p); err == nil {
			t.Errorf("%s: Build built a Job from a template the webhook refuses", name)
		}
	}
	accepted := infrav1.RunnerPodTemplate{
		Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"team": "a", "example.com/captf": "x", "notcaptf.io/a": "b"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied": "x"}},
		Volumes: []infrav1.RunnerVolume{cmVolume("ca", "/etc/ssl/custom"), cmVolume("b", "/captfx"), cmVolume("c", "/var/run/secrets/registry"),
			cmVolume("d", "/dev/shm/x")},
	}
	for family := range podTemplateFamilies {
		podTemplateFamilies[family](&accepted)
	}
	accepted.Volumes = append(accepted.Volumes, cmVolume("e", "/opt/e"))
	if errs := ValidatePodTemplate(base, &accepted); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
}
