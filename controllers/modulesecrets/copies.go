package modulesecrets

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// PodSecretNames are the distinct names, sorted, of the Secrets that spec's pod-facing
// references (Kind.Pod) name: the i-th is copied to naming.RunModuleSecretName(job, i).
func PodSecretNames(spec *infrav1.TerraformSpec) []string {
	set := map[string]bool{}
	for _, r := range Refs(field.NewPath("spec"), spec) {
		if r.Kind.Pod() {
			set[r.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// RenamePod returns a copy of spec whose pod-facing Secret references name the Job's per-run
// copies (naming.RunModuleSecretName(job, i), i the Secret's index in PodSecretNames), so the
// pod reads only Secrets the manager wrote from what it judged. spec is not changed.
func RenamePod(spec *infrav1.TerraformSpec, job string) *infrav1.TerraformSpec {
	out := spec.DeepCopy()
	names := PodSecretNames(spec)
	rename := func(name string) string {
		i, _ := slices.BinarySearch(names, name)
		return naming.RunModuleSecretName(job, i)
	}
	for i := range out.Job.Env {
		if vf := out.Job.Env[i].ValueFrom; vf != nil && vf.SecretKeyRef != nil {
			vf.SecretKeyRef.Name = rename(vf.SecretKeyRef.Name)
		}
	}
	if c := out.Job.CLIConfig; c != nil {
		if c.SecretRef != nil {
			c.SecretRef.Name = rename(c.SecretRef.Name)
		}
		for i := range c.Credentials {
			c.Credentials[i].SecretKeyRef.Name = rename(c.Credentials[i].SecretKeyRef.Name)
		}
	}
	if t := out.Job.PodTemplate; t != nil {
		for i := range t.Volumes {
			if s := t.Volumes[i].Secret; s != nil {
				s.Name = rename(s.Name)
			}
		}
	}
	return out
}

// Copies is the data of each per-run copy, by the source Secret's name: for every pod-facing
// reference of spec whose Secret is in secrets (Check's Result.Secrets), the keys it names
// (every key when it names none), merged per Secret. A Secret no reference reads whole gives
// only the keys named, so a copy never carries more than module code receives.
func Copies(spec *infrav1.TerraformSpec, secrets map[string]*corev1.Secret) map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for _, r := range Refs(field.NewPath("spec"), spec) {
		s, ok := secrets[r.Name]
		if !r.Kind.Pod() || !ok {
			continue
		}
		data := out[r.Name]
		if data == nil {
			data = map[string][]byte{}
			out[r.Name] = data
		}
		if r.Keys == nil {
			maps.Copy(data, s.Data)
			continue
		}
		for _, k := range r.Keys {
			if v, ok := s.Data[k]; ok {
				data[k] = v
			}
		}
	}
	return out
}

// Values are the values of copies, for the runner's redaction list.
func Values(copies map[string]map[string][]byte) []string {
	var out []string
	for _, data := range copies {
		for _, v := range data {
			out = append(out, string(v))
		}
	}
	slices.Sort(out)
	return out
}

// RunCopies are the per-run copies of job (created, so it has a UID) for spec: one Opaque,
// immutable Secret per source in PodSecretNames that Copies holds, named
// naming.RunModuleSecretName(job, i), owned by the Job (deleted with it), with the Job's owner
// labels. A source missing from copies (an optional reference whose Secret is absent) gets no
// copy, so the kubelet leaves the optional variable unset.
func RunCopies(job *batchv1.Job, spec *infrav1.TerraformSpec, copies map[string]map[string][]byte) []*corev1.Secret {
	labels := map[string]string{}
	for _, k := range []string{infrav1.OwnerKindLabel, infrav1.OwnerNameLabel, infrav1.ClusterNameLabel, infrav1.WatchFilterLabel} {
		if v, ok := job.Labels[k]; ok {
			labels[k] = v
		}
	}
	labels[infrav1.ManagedLabel] = "true"
	var out []*corev1.Secret
	for i, name := range PodSecretNames(spec) {
		data, ok := copies[name]
		if !ok {
			continue
		}
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: naming.RunModuleSecretName(job.Name, i), Namespace: job.Namespace, Labels: maps.Clone(labels),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job",
					Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
			},
			Type:      corev1.SecretTypeOpaque,
			Immutable: ptr.To(true),
			Data:      data,
		})
	}
	return out
}

// OwnCopy reports whether s, found under a per-run copy's name, is the copy RunCopies made for
// job: owned by it, Opaque, no token. A Secret someone else put there first is not.
func OwnCopy(s *corev1.Secret, job *batchv1.Job) bool {
	if IsToken(s) || s.Type != corev1.SecretTypeOpaque {
		return false
	}
	ref := metav1.GetControllerOf(s)
	return ref != nil && ref.UID == job.UID && ref.Kind == "Job"
}
