package jobs

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// DefaultContainerAnnotation names the container kubectl logs and exec pick; Build sets it to
// MainContainer on every pod.
const DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// ReservedVolumePrefix starts every volume name CAPTF may add to a Job's pod, now or later; a
// volume of spec.job.podTemplate may not use it, nor any name in ReservedVolumeNames.
const ReservedVolumePrefix = "captf-"

// ReservedVolumeNames are the names of the volumes Build adds to a Job's pod.
var ReservedVolumeNames = []string{volumeInputs, volumeModule, volumeWork, volumeBin, volumeChannel, VolumeServiceAccount, VolumeIdentity}

// ReservedMountPaths are the folders (and the file) of a Job's pod that are CAPTF's: every
// runnerapi folder lies under one of them (TestReservedMountPathsCoverRunnerDirs). A volume
// of spec.job.podTemplate may be mounted neither at, under nor above any of them: under would
// write into CAPTF's folders, above would hide them. /var/run/secrets/kubernetes.io is where
// a pod's default ServiceAccount token lives; a file there would pass for one.
var ReservedMountPaths = []string{"/captf", "/var/run/secrets/captf.io", "/var/run/secrets/kubernetes.io", runnerapi.TerminationLog}

// reservedLabelDomains are label and annotation prefixes no template may set: CAPTF's own,
// and the Job controller's (whose labels select the Job's pods).
var reservedLabelDomains = []string{"captf.io", "batch.kubernetes.io"}

// jobControllerLabels are the Job controller's labels without a prefix.
var jobControllerLabels = []string{"controller-uid", "job-name"}

// SecurityProfileAnnotationPrefixes start the annotations through which a pod's AppArmor or
// seccomp profile is chosen (the kubelet still honours the AppArmor ones); the pod's security
// settings are CAPTF's, so no template may set them.
var SecurityProfileAnnotationPrefixes = []string{
	"container.apparmor.security.beta.kubernetes.io/",
	"seccomp.security.alpha.kubernetes.io/",
	"container.seccomp.security.alpha.kubernetes.io/",
}

// SecurityProfileAnnotation reports whether key chooses a pod's or container's AppArmor or
// seccomp profile (SecurityProfileAnnotationPrefixes).
func SecurityProfileAnnotation(key string) bool {
	for _, p := range SecurityProfileAnnotationPrefixes {
		if strings.HasPrefix(key, p) || key == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return false
}

// ReservedPodLabel reports whether key is a pod label CAPTF or the Job controller sets: the
// captf.io and batch.kubernetes.io prefixes (and their subdomains), every label
// naming.OwnerLabels sets (the owner, cluster and shard labels), the operation label, and the
// Job controller's controller-uid and job-name.
func ReservedPodLabel(key string) bool {
	if reservedDomain(key) || slices.Contains(jobControllerLabels, key) || key == infrav1.OperationLabel {
		return true
	}
	_, owner := naming.OwnerLabels("Kind", "name", "cluster", "shard")[key]
	return owner
}

// ReservedPodAnnotation reports whether key is a pod annotation CAPTF or the Job controller
// sets: the captf.io and batch.kubernetes.io prefixes and DefaultContainerAnnotation.
func ReservedPodAnnotation(key string) bool {
	return reservedDomain(key) || key == DefaultContainerAnnotation
}

func reservedDomain(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range reservedLabelDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// reservedMountPath is the reserved path p is at, under or above, or "".
func reservedMountPath(p string) string {
	for _, r := range ReservedMountPaths {
		if p == r || p == "/" || strings.HasPrefix(r, p+"/") || strings.HasPrefix(p, r+"/") {
			return r
		}
	}
	return ""
}

// ValidatePodTemplate is the one rule for spec.job.podTemplate (t at fld): the admission
// webhook refuses what it returns, and Build refuses to build a Job from it. It refuses labels
// and annotations CAPTF or the Job controller set (ReservedPodLabel, ReservedPodAnnotation) or
// that Kubernetes would refuse; annotations that choose a security profile
// (SecurityProfileAnnotation); volume names CAPTF uses (ReservedVolumeNames and the
// ReservedVolumePrefix) or that repeat; mount paths that are not absolute and clean, that
// repeat, or that are at, under or above ReservedMountPaths; and item paths that are not
// relative paths inside the volume. It is pure: the Secret a volume names is judged by
// modulesecrets (the rule for every Secret that reaches module code).
func ValidatePodTemplate(fld *field.Path, t *infrav1.RunnerPodTemplate) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validatePodMetadata(fld.Child("metadata"), t.Metadata)...)
	names, mounts := map[string]bool{}, map[string]bool{}
	for i, v := range t.Volumes {
		errs = append(errs, validateVolume(fld.Child("volumes").Index(i), v, names, mounts)...)
	}
	return errs
}

func validatePodMetadata(fld *field.Path, m infrav1.RunnerPodMetadata) field.ErrorList {
	errs := metav1validation.ValidateLabels(m.Labels, fld.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(m.Annotations, fld.Child("annotations"))...)
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		if ReservedPodLabel(k) {
			errs = append(errs, field.Forbidden(fld.Child("labels").Key(k), fmt.Sprintf(
				"label %s is CAPTF's or the Job controller's: they find, own and select the Job's pod by it; choose a key outside captf.io/ and batch.kubernetes.io/ "+
					"other than cluster.x-k8s.io/cluster-name, cluster.x-k8s.io/watch-filter, controller-uid and job-name", k)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		if SecurityProfileAnnotation(k) {
			errs = append(errs, field.Forbidden(fld.Child("annotations").Key(k), fmt.Sprintf(
				"annotation %s would choose the pod's AppArmor or seccomp profile, which CAPTF sets (RuntimeDefault) and no template may loosen; remove it", k)))
			continue
		}
		if ReservedPodAnnotation(k) {
			errs = append(errs, field.Forbidden(fld.Child("annotations").Key(k), fmt.Sprintf(
				"annotation %s is CAPTF's or the Job controller's; choose a key outside captf.io/ and batch.kubernetes.io/ other than %s", k, DefaultContainerAnnotation)))
		}
	}
	return errs
}

func validateVolume(fld *field.Path, v infrav1.RunnerVolume, names, mounts map[string]bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case slices.Contains(ReservedVolumeNames, v.Name) || strings.HasPrefix(v.Name, ReservedVolumePrefix):
		errs = append(errs, field.Forbidden(fld.Child("name"), fmt.Sprintf(
			"volume name %s is CAPTF's (its volumes are %s, and it reserves every name starting with %s); rename the volume",
			v.Name, strings.Join(ReservedVolumeNames, ", "), ReservedVolumePrefix)))
	case names[v.Name]:
		errs = append(errs, field.Duplicate(fld.Child("name"), v.Name))
	}
	names[v.Name] = true
	mp := fld.Child("mountPath")
	switch r := reservedMountPath(v.MountPath); {
	case !path.IsAbs(v.MountPath) || path.Clean(v.MountPath) != v.MountPath:
		errs = append(errs, field.Invalid(mp, v.MountPath, "must be an absolute, clean path (no trailing slash, no . or .. parts), for example /etc/ssl/custom"))
	case r != "":
		errs = append(errs, field.Forbidden(mp, fmt.Sprintf(
			"%s is at, under or above %s, which is CAPTF's (its folders and files are %s): it would hide or write into them; mount the volume elsewhere, for example /etc/captf-extra/%s",
			v.MountPath, r, strings.Join(ReservedMountPaths, ", "), v.Name)))
	case mounts[v.MountPath]:
		errs = append(errs, field.Duplicate(mp, v.MountPath))
	}
	mounts[v.MountPath] = true
	src := v.ConfigMap
	srcPath := fld.Child("configMap")
	if v.Secret != nil {
		src, srcPath = v.Secret, fld.Child("secret")
	}
	if (v.ConfigMap == nil) == (v.Secret == nil) {
		return append(errs, field.Required(fld, "set exactly one of configMap and secret"))
	}
	for j, item := range src.Items {
		p := srcPath.Child("items").Index(j)
		if item.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), "the key of the ConfigMap or Secret to mount"))
		}
		if item.Path == "" || path.IsAbs(item.Path) || slices.Contains(strings.Split(item.Path, "/"), "..") {
			errs = append(errs, field.Invalid(p.Child("path"), item.Path, "must be a relative file path inside the volume, without .. parts"))
		}
	}
	return errs
}

// podTemplateVolumes are the template's volumes, each with its read-only mount in the main
// container.
func podTemplateVolumes(t *infrav1.RunnerPodTemplate) []specVolume {
	if t == nil {
		return nil
	}
	out := make([]specVolume, 0, len(t.Volumes))
	for _, v := range t.Volumes {
		var src corev1.VolumeSource
		if cm := v.ConfigMap; cm != nil {
			src.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
				Items: copyItems(cm.Items), DefaultMode: ptr.To[int32](0o444), Optional: ptr.To(false)}
		} else if s := v.Secret; s != nil {
			src.Secret = &corev1.SecretVolumeSource{SecretName: s.Name,
				Items: copyItems(s.Items), DefaultMode: ptr.To[int32](0o440), Optional: ptr.To(false)}
		}
		out = append(out, specVolume{
			volume: corev1.Volume{Name: v.Name, VolumeSource: src},
			mount:  corev1.VolumeMount{Name: v.Name, MountPath: v.MountPath, ReadOnly: true},
		})
	}
	return out
}

func copyItems(items []corev1.KeyToPath) []corev1.KeyToPath {
	if items == nil {
		return nil
	}
	out := make([]corev1.KeyToPath, len(items))
	for i := range items {
		items[i].DeepCopyInto(&out[i])
	}
	return out
}

// applyPlacement sets the template's placement and pull Secrets on pod.
func applyPlacement(pod *corev1.PodSpec, t *infrav1.RunnerPodTemplate) {
	if t == nil {
		return
	}
	if len(t.NodeSelector) > 0 {
		pod.NodeSelector = maps.Clone(t.NodeSelector)
	}
	for i := range t.Tolerations {
		pod.Tolerations = append(pod.Tolerations, *t.Tolerations[i].DeepCopy())
	}
	pod.Affinity = t.Affinity.DeepCopy()
	pod.PriorityClassName = t.PriorityClassName
	pod.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), t.ImagePullSecrets...)
	if len(pod.ImagePullSecrets) == 0 {
		pod.ImagePullSecrets = nil
	}
}

// podMeta is the pod's labels and annotations: the template's, then CAPTF's over them
// (ValidatePodTemplate refuses a template that sets a key of CAPTF's).
func podMeta(t *infrav1.RunnerPodTemplate, labels map[string]string) (map[string]string, map[string]string) {
	l := map[string]string{}
	a := map[string]string{}
	if t != nil {
		maps.Copy(l, t.Metadata.Labels)
		maps.Copy(a, t.Metadata.Annotations)
	}
	maps.Copy(l, labels)
	a[DefaultContainerAnnotation] = MainContainer
	return l, a
}
