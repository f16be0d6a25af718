package v1alpha1

// ImagePullFailedReason is the reason of the running operation's condition (ApplyJobSucceeded,
// DriftJobSucceeded or RestoreJobSucceeded, status False) while the Job's pod cannot start
// because the kubelet cannot pull one of its images (ErrImagePull, ImagePullBackOff,
// InvalidImageName, ErrImageNeverPull): typically a spec.module.image whose registry refuses
// the pod's pull secret. The message names the Job, the container and the image, and carries
// the registry's answer. The Job is kept: the kubelet pulls again, so a fixed secret lets it
// run; it fails at its activeDeadlineSeconds otherwise.
const ImagePullFailedReason = "ImagePullFailed"

// JobCannotStartReason is the reason of an operation's condition (False) while its running Job's
// pod cannot start for another reason than an image pull: a container whose configuration the
// kubelet cannot build (an env variable naming a missing Secret or ConfigMap key), a pod that no
// node accepts, a pod whose volumes cannot be mounted (a missing module ConfigMap or Secret), or
// no pod at all (a missing PriorityClass). The reasons that can heal by themselves are reported
// only after they lasted decide.StartGrace. A deleting object deletes such a Job at once when its
// pods prove that terraform never started; otherwise the Job fails at its activeDeadlineSeconds.
const JobCannotStartReason = "JobCannotStart"
