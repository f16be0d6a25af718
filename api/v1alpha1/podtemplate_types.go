package v1alpha1

import corev1 "k8s.io/api/core/v1"

// PodTemplateSecretRefusedReason is no longer set: a Secret volume that is a ServiceAccount
// token is refused as every Secret that reaches module code is, with
// ModuleSecretRefusedReason (controllers/modulesecrets). Kept for clients that compare it.
const PodTemplateSecretRefusedReason = "PodTemplateSecretRefused"

// RunnerPodTemplate is what a platform may set on the pod of every Job of an object: where it
// runs (nodeSelector, tolerations, affinity, priorityClassName), how its images are pulled
// (imagePullSecrets), labels and annotations for the platform's own tooling, and read-only
// ConfigMap or Secret volumes for the module (a CA bundle, a CLI configuration).
//
// It is a closed list on purpose: a field that could give the pod the node's namespaces, a
// host folder, privileges or a Kubernetes credential (hostNetwork, hostPID, hostIPC, hostPath,
// privileged, securityContext, serviceAccountName, automountServiceAccountToken, a projected
// volume) cannot be written here at all (TestRunnerPodTemplateCannotCarryHostAccess in
// api/v1alpha1 fails if this type grows one). CAPTF's own settings of the pod (its security
// context, its containers, volumes, labels and annotations) stay CAPTF's: the admission
// webhook and jobs.Build refuse a template that names them
// (jobs.ValidatePodTemplate; docs/production.md, "Placing the runner's pod").
type RunnerPodTemplate struct {
	// metadata adds labels and annotations to the Job's pod (not to the Job). Keys CAPTF or the
	// Job controller set are refused: the captf.io/ prefix, cluster.x-k8s.io/cluster-name and
	// cluster.x-k8s.io/watch-filter, the batch.kubernetes.io/ prefix, controller-uid, job-name
	// and kubectl.kubernetes.io/default-container, and so are the annotations that would choose
	// an AppArmor or seccomp profile (TestValidatePodTemplate in controllers/jobs,
	// and the webhooks suite's "spec.job.podTemplate at admission").
	// +optional
	Metadata RunnerPodMetadata `json:"metadata,omitempty"`

	// nodeSelector of the Job's pod: it runs only on nodes with these labels (the e2e spec
	// "Runner placement, with the real kube-scheduler" shows it with a toleration).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the Job's pod, for dedicated nodes with taints; without them the pod of
	// a runner that selects a tainted node stays unscheduled (the same e2e spec).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the Job's pod: node affinity, and pod (anti-)affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// priorityClassName of the Job's pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// imagePullSecrets of the Job's pod, for a private registry of module images.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// volumes are ConfigMaps or Secrets mounted read-only into the main (terraform) container
	// only, never into the state channel or install-runner. A name or mount path CAPTF uses
	// is refused (a name of CAPTF's volumes or starting with captf-; a mount path equal to,
	// under or above /captf, /var/run/secrets/captf.io, /var/run/secrets/kubernetes.io or
	// /dev/termination-log). A Secret volume's Secret must carry captf.io/variables=true and
	// must not be a ServiceAccount token: by the admission webhook when the Secret exists, and
	// again by the controller before every Job (InputsValid=False, reason ModuleSecretRefused
	// or VariablesSourceNotOptedIn, and a Warning event); the pod mounts the Job's own copy of
	// what was judged. TestValidatePodTemplate, the webhooks suite's "spec.job.podTemplate at
	// admission" and "Secrets that reach module code, at admission" and the engine suite's
	// "Secrets that reach module code, before every Job" prove it;
	// TestPodTemplateKeepsTheGuarantees that they reach the main container alone, and the e2e
	// spec that a module reads a ConfigMap volume at its mountPath.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Volumes []RunnerVolume `json:"volumes,omitempty"`
}

// RunnerPodMetadata is the pod's added labels and annotations.
type RunnerPodMetadata struct {
	// labels added to the Job's pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to the Job's pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RunnerVolume is a ConfigMap or a Secret, mounted read-only into the main container.
// +kubebuilder:validation:XValidation:rule="has(self.configMap) != has(self.secret)",message="set exactly one of configMap and secret"
type RunnerVolume struct {
	// name of the volume in the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// mountPath is the absolute folder the main container reads the files from.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	MountPath string `json:"mountPath"`

	// configMap is the ConfigMap whose keys become files.
	// +optional
	ConfigMap *RunnerVolumeSource `json:"configMap,omitempty"`

	// secret is the Secret whose keys become files. It must carry captf.io/variables=true; a
	// ServiceAccount token Secret is refused.
	// +optional
	Secret *RunnerVolumeSource `json:"secret,omitempty"`
}

// RunnerVolumeSource names a ConfigMap or Secret in the object's namespace and, optionally,
// which of its keys become which files.
type RunnerVolumeSource struct {
	// name of the ConfigMap or Secret, in the object's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// items maps keys to relative file paths; without it every key becomes a file of its name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Items []corev1.KeyToPath `json:"items,omitempty"`
}
