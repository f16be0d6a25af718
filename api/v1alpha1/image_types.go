package v1alpha1

// ImagePullFailedReason is the reason of the running operation's condition (ApplyJobSucceeded,
// DriftJobSucceeded or RestoreJobSucceeded, status False) while the Job's pod cannot start
// because the kubelet cannot pull one of its images (ErrImagePull, ImagePullBackOff,
// InvalidImageName, ErrImageNeverPull): typically a spec.module.image whose registry refuses
// the pod's pull secret. The message names the Job, the container and the image, and carries
// the registry's answer. The Job is kept: the kubelet pulls again, so a fixed secret lets it
// run; it fails at its activeDeadlineSeconds otherwise.
const ImagePullFailedReason = "ImagePullFailed"
