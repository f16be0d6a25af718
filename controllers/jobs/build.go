package jobs

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Container and volume names of a CAPTF Job's pod.
const (
	MainContainer    = "terraform"
	InstallContainer = "install-runner"
	// ChannelContainer is the state channel, a native sidecar (an init container with
	// restartPolicy Always): the only container with a Kubernetes credential.
	ChannelContainer = "state-channel"

	volumeInputs  = "inputs"
	volumeModule  = "module"
	volumeWork    = "work"
	volumeBin     = "runner"
	volumeChannel = "channel"
	// VolumeServiceAccount is the projected ServiceAccount token, mounted only into the
	// state channel.
	VolumeServiceAccount = "captf-serviceaccount"
	// VolumeIdentity is the optional cloud identity token (spec.job.identityToken), mounted
	// only into the main container.
	VolumeIdentity = "captf-identity"
)

// Defaults of every Job, set by the manager's flags.
const (
	// DefaultRuntimeImage runs ConfigMap modules: OpenTofu's minimal image, which holds only
	// /usr/local/bin/tofu. The runner needs nothing else (see docs/jobs.md).
	DefaultRuntimeImage = "ghcr.io/opentofu/opentofu:1.10.10-minimal"
	// DefaultServiceAccountName is the runner account CAPTF manages in each namespace.
	DefaultServiceAccountName = "captf-runner"
	// TerminationGracePeriodSeconds is how long an interrupted terraform has to stop and
	// release the state lock before the kubelet kills it.
	TerminationGracePeriodSeconds int64 = 600
	// RunnerUID is the user (and group) the pod runs as.
	RunnerUID int64 = 65532
	// ChannelTokenExpirationSeconds is the lifetime of the state channel's projected token; the
	// kubelet refreshes it before it expires and the channel reads the file on every request.
	ChannelTokenExpirationSeconds int64 = 3600
	// DefaultIdentityTokenExpirationSeconds applies when spec.job.identityToken leaves
	// expirationSeconds unset; the kubelet refuses less than MinTokenExpirationSeconds.
	DefaultIdentityTokenExpirationSeconds int64 = 3600
	MinTokenExpirationSeconds             int64 = 600
)

// Defaults carries the manager-wide settings of Jobs.
type Defaults struct {
	// RunnerImage is the manager image; its /runner is copied into every Job.
	RunnerImage string
	// RuntimeImage runs ConfigMap modules; empty means DefaultRuntimeImage.
	RuntimeImage string
	// ServiceAccountName runs Jobs whose spec names none; empty means DefaultServiceAccountName.
	ServiceAccountName string
}

// Owner identifies the reconciled object a Job belongs to.
type Owner struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	UID        types.UID
	// Cluster is the owning Cluster API Cluster's name (may be empty).
	Cluster string
	// Shard is the owner's shard (naming.ShardOf), copied onto the Job (may be empty).
	Shard string
}

// Params is everything a Job is built from. The same Params always build the same Job.
type Params struct {
	Owner Owner
	// Suffix is the object's state suffix (naming.StateSuffix); Seq its run sequence number.
	Suffix string
	Seq    int64
	// Operation the Job runs.
	Operation infrav1.Operation
	// InputsHash is recorded on the Job (infrav1.InputsHashAnnotation).
	InputsHash string
	// Spec is the object's module, inputs and job policy.
	Spec infrav1.TerraformSpec
	// PlanID (Operation Apply, Refresh or Destroy): apply this saved plan (runnerapi.PlanID) from the object's
	// plan Secret instead of planning afresh. Empty: a normal apply. The Job carries it as the
	// annotation runnerapi.PlanIDAnnotation and passes it to the runner and to the state
	// channel, which hands out only that plan, once.
	PlanID string
	// RefreshOnly (Operation Plan or Drift): the plan is a refresh-only plan; a Plan's is
	// applied later by a Refresh Job, a Drift check's compares the infrastructure with the
	// state (drift mode Accept). Passed to the runner and the state channel
	// (runnerapi.FlagRefreshOnly).
	RefreshOnly bool
	// DestroyPlan (Operation Plan): the plan is a destroy plan (`plan -destroy`) of a deleting
	// object, applied later by a Destroy Job. Marked on the Job (infrav1.DestroyPlanAnnotation)
	// and passed to the runner and the state channel (runnerapi.FlagDestroyPlan).
	DestroyPlan bool
	// RefreshRequest (Operation Plan or Refresh) is the value of the object's
	// infrav1.RefreshAnnotation the run answers, recorded on the Job under that annotation so
	// the controller clears only the request the run answered.
	RefreshRequest string
	// Target (Operation Apply, or a Plan that is neither refresh-only nor a destroy plan) is
	// the value of the object's infrav1.TargetOperationAnnotation the run carries out (a
	// replace or an import; runnerapi.ParseTarget), recorded on the Job under that annotation so
	// the controller clears only the request the run carried out. The runner gets its canonical
	// form (runnerapi.FlagTarget), and so does a Plan Job's state channel, which records it in
	// the plan record.
	Target string
	// StateLineage is the lineage of the state the controller read live before this Job; the
	// Job's state channel serves only a state of that lineage (runnerapi.FlagStateLineage).
	// Empty: the controller read no state (a first apply, or a restore, which replaces the
	// state) and the channel serves whatever the Secret holds.
	StateLineage string
	// IdentityEnv are the names of the variables of the object's TerraformIdentity
	// (spec.job.identityRef), sorted: the main container, and no other, reads each from the key
	// of that name in the Job's per-run identity Secret (naming.RunIdentitySecretName), which
	// the engine writes after the Job exists. Empty: the object references no identity.
	IdentityEnv []string
	Defaults
}

// Build returns the Job for p: named naming.JobName(suffix, seq), owned by the object, one pod
// that is never retried or replaced while an old one still terminates, the runner installed by
// an init container and run as the main container's command. It is a pure function of p. Its
// parts: jobMeta (names, labels, annotations, owner), podSpec (the pod's settings and security
// context), the three containers (installContainer, channelContainer, mainContainer) and the
// volumes, of which specVolumes depend on the spec (the ConfigMap module, the identity token).
func Build(p Params) (*batchv1.Job, error) {
	if err := validate(p); err != nil {
		return nil, err
	}
	name := naming.JobName(p.Suffix, p.Seq)
	// The pod names no Secret of the object's author: every Secret it hands to module code is
	// the Job's per-run copy, written by the engine from what it judged (modulesecrets).
	p.Spec = *modulesecrets.RenamePod(&p.Spec, name)
	labels := naming.OwnerLabels(p.Owner.Kind, p.Owner.Name, p.Owner.Cluster, p.Owner.Shard)
	labels[infrav1.OperationLabel] = string(p.Operation)
	mod := moduleOf(p)
	extra := specVolumes(p)

	volumes := baseVolumes(name)
	for _, v := range extra {
		volumes = append(volumes, v.volume)
	}
	inits := []corev1.Container{installContainer(p), channelContainer(p, name)}
	podLabels, podAnnotations := podMeta(p.Spec.Job.PodTemplate, labels)
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: jobMeta(p, name, labels),
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			// With backoffLimit 0 there is no retry; Failed also means the Job controller never
			// counts a terminating pod as gone, so two pods of a Job never overlap.
			PodReplacementPolicy:  ptr.To(batchv1.Failed),
			ActiveDeadlineSeconds: ptr.To(p.Spec.Job.EffectiveActiveDeadlineSeconds()),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       podSpec(p, inits, mainContainer(p, name, mod, extra), volumes),
			},
		},
	}
	return job, nil
}

// jobMeta is the Job's name, namespace, labels, annotations (the inputs hash, and the plan ID,
// refresh request, refresh-only and destroy-plan marks when set) and its controller reference to the object.
func jobMeta(p Params, name string, labels map[string]string) metav1.ObjectMeta {
	annotations := map[string]string{infrav1.InputsHashAnnotation: p.InputsHash}
	if p.PlanID != "" {
		annotations[runnerapi.PlanIDAnnotation] = p.PlanID
	}
	if p.RefreshRequest != "" {
		annotations[infrav1.RefreshAnnotation] = p.RefreshRequest
	}
	if p.RefreshOnly {
		annotations[infrav1.RefreshOnlyAnnotation] = "true"
	}
	if p.DestroyPlan {
		annotations[infrav1.DestroyPlanAnnotation] = "true"
	}
	if p.Target != "" {
		annotations[infrav1.TargetOperationAnnotation] = p.Target
	}
	annotateIdentity(p, annotations)
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   p.Owner.Namespace,
		Labels:      labels,
		Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         p.Owner.APIVersion,
			Kind:               p.Owner.Kind,
			Name:               p.Owner.Name,
			UID:                p.Owner.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// serviceAccount is the account the pod runs under: the spec's, else the manager's default,
// else DefaultServiceAccountName.
func serviceAccount(p Params) string {
	if sa := p.Spec.Job.ServiceAccountName; sa != "" {
		return sa
	}
	if p.ServiceAccountName != "" {
		return p.ServiceAccountName
	}
	return DefaultServiceAccountName
}

// podSpec is the pod's settings: never restarted, a long grace period for terraform to
// release the lock, no default token and no service links, the pod security context, and the
// placement and pull Secrets of spec.job.podTemplate.
func podSpec(p Params, init []corev1.Container, main corev1.Container, volumes []corev1.Volume) corev1.PodSpec {
	pod := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To(TerminationGracePeriodSeconds),
		ServiceAccountName:            serviceAccount(p),
		// No container gets the default token: only the state channel mounts one,
		// through its own projected volume. Terraform and the module hold none.
		AutomountServiceAccountToken: ptr.To(false),
		// Thousands of service variables would only crowd terraform's environment.
		EnableServiceLinks: ptr.To(false),
		SecurityContext:    podSecurity(),
		InitContainers:     init,
		Containers:         []corev1.Container{main},
		Volumes:            volumes,
	}
	applyPlacement(&pod, p.Spec.Job.PodTemplate)
	return pod
}

// podSecurity runs every container as RunnerUID, never root, under the runtime's seccomp
// profile.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(RunnerUID),
		RunAsGroup:     ptr.To(RunnerUID),
		FSGroup:        ptr.To(RunnerUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// installContainer copies the runner from the manager's image into the runner volume.
func installContainer(p Params) corev1.Container {
	return corev1.Container{
		Name:    InstallContainer,
		Image:   p.RunnerImage,
		Command: runnerapi.InstallCommand(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: volumeBin, MountPath: runnerapi.BinDir}},
		TerminationMessagePath:   runnerapi.TerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(true),
	}
}

// channelContainer is the state channel: a native sidecar, started after install-runner and
// before the main container, stopped after it. It runs in the manager's image, never in the
// module's, and is the only container that mounts a Kubernetes token.
func channelContainer(p Params, name string) corev1.Container {
	command := runnerapi.ChannelCommand(runnerapi.RunnerPath, runnerapi.ChannelInvocation{
		Dir: runnerapi.ChannelDir, Namespace: p.Owner.Namespace, Suffix: p.Suffix, Job: name, RunLease: naming.RunLeaseName(p.Suffix),
		OwnerKind: p.Owner.Kind, OwnerName: p.Owner.Name, OwnerUID: string(p.Owner.UID),
		TokenFile: path.Join(runnerapi.ServiceAccountDir, runnerapi.ServiceAccountTokenFile),
		CAFile:    path.Join(runnerapi.ServiceAccountDir, runnerapi.ServiceAccountCAFile),
		Operation: string(p.Operation), InputsHash: p.InputsHash, PlanID: p.PlanID, StateLineage: p.StateLineage,
		// The channel stores plans: only a Plan Job's refresh-only flag concerns it.
		RefreshOnly: p.RefreshOnly && p.Operation == infrav1.OperationPlan,
		DestroyPlan: p.DestroyPlan,
		Target:      canonicalTarget(p.Target, p.Operation == infrav1.OperationPlan),
	})
	return corev1.Container{
		Name:          ChannelContainer,
		Image:         p.RunnerImage,
		Command:       command,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env: []corev1.EnvVar{
			{Name: runnerapi.EnvChannelPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: runnerapi.EnvChannelPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeBin, MountPath: runnerapi.BinDir, ReadOnly: true},
			{Name: volumeChannel, MountPath: runnerapi.ChannelDir},
			{Name: VolumeServiceAccount, MountPath: runnerapi.ServiceAccountDir, ReadOnly: true},
		},
		TerminationMessagePath:   runnerapi.TerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(true),
	}
}

// mainContainer runs the runner on the module: in the runtime image for a ConfigMap module,
// in the module's image otherwise.
func mainContainer(p Params, name string, mod module, extra []specVolume) corev1.Container {
	inv := runnerapi.Invocation{
		Operation:   string(p.Operation),
		ModuleDir:   mod.dir,
		InputsDir:   runnerapi.InputsDir,
		WorkDir:     runnerapi.WorkDir,
		ResultFile:  runnerapi.TerminationLog,
		LockTimeout: time.Duration(p.Spec.Job.EffectiveLockTimeoutSeconds()) * time.Second,
		ChannelDir:  runnerapi.ChannelDir,
		PlanID:      p.PlanID,
		RefreshOnly: p.RefreshOnly,
		DestroyPlan: p.DestroyPlan,
		Target:      canonicalTarget(p.Target, true),
	}
	// The main container reads the channel's folder but cannot write it: the channel's
	// records (fenced, lock broken, lock holder) are the channel's word, not the module's.
	mounts := []corev1.VolumeMount{
		{Name: volumeInputs, MountPath: runnerapi.InputsDir, ReadOnly: true},
		{Name: volumeWork, MountPath: runnerapi.WorkDir},
		{Name: volumeBin, MountPath: runnerapi.BinDir, ReadOnly: true},
		{Name: volumeChannel, MountPath: runnerapi.ChannelDir, ReadOnly: true},
	}
	for _, v := range extra {
		mounts = append(mounts, v.mount)
	}
	return corev1.Container{
		Name:                     MainContainer,
		Image:                    mod.image,
		Command:                  runnerapi.Command(runnerapi.RunnerPath, inv),
		Env:                      mainEnv(p, name),
		Resources:                *p.Spec.Job.Resources.DeepCopy(),
		VolumeMounts:             mounts,
		TerminationMessagePath:   runnerapi.TerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(mod.readOnlyRoot),
	}
}

// mainEnv is the main container's environment: the Job and pod names, the identity token's
// file when the spec asks for one, the CLI configuration (cliConfigEnv), then the spec's own
// variables.
func mainEnv(p Params, name string) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(p.Spec.Job.Env)+2)
	env = append(env,
		corev1.EnvVar{Name: runnerapi.EnvJobName, Value: name},
		corev1.EnvVar{Name: runnerapi.EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
	)
	if p.Spec.Job.IdentityToken != nil {
		env = append(env, corev1.EnvVar{Name: runnerapi.EnvIdentityTokenFile, Value: path.Join(runnerapi.IdentityDir, runnerapi.IdentityTokenFile)})
	}
	env = append(env, cliConfigEnv(p)...)
	for _, e := range p.Spec.Job.Env {
		env = append(env, *e.DeepCopy())
	}
	return append(env, identityEnv(p, name)...)
}

// module is where the main container finds the module: the image it runs, the folder the
// runner reads the module from, and whether that image's root filesystem is read-only.
type module struct {
	image        string
	dir          string
	readOnlyRoot bool
}

// moduleOf is the module of p. A ConfigMap module runs in the runtime image, whose root
// filesystem is read-only (the runner needs only its emptyDirs); an image module runs in the
// user's image, which may write where it likes, from the spec's path (relative to the image's
// working directory, which the container keeps because it sets no workingDir).
func moduleOf(p Params) module {
	if p.Spec.Module.ConfigMap != nil {
		image := p.RuntimeImage
		if image == "" {
			image = DefaultRuntimeImage
		}
		return module{image: image, dir: runnerapi.ModuleDir, readOnlyRoot: true}
	}
	dir := "."
	if p.Spec.Module.Path != "" {
		dir = path.Clean(p.Spec.Module.Path)
	}
	return module{image: p.Spec.Module.Image, dir: dir}
}

// baseVolumes are the volumes of every Job: the per-run inputs Secret, the work folder, the
// runner's folder, the channel's folder (in memory) and the channel's projected token.
func baseVolumes(name string) []corev1.Volume {
	return []corev1.Volume{
		{Name: volumeInputs, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: naming.RunSecretName(name), DefaultMode: ptr.To[int32](0o440), Optional: ptr.To(false),
		}}},
		{Name: volumeWork, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volumeBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// The channel's address and per-run credential live in memory, never on the node's disk.
		{Name: volumeChannel, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
		{Name: VolumeServiceAccount, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o440),
			Sources: []corev1.VolumeProjection{
				// No audience: the API server's own, the only place this token is good for.
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Path: runnerapi.ServiceAccountTokenFile, ExpirationSeconds: ptr.To(ChannelTokenExpirationSeconds)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: runnerapi.ServiceAccountCAFile}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
					Path: runnerapi.ServiceAccountNamespaceFile, FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		}}},
	}
}

// specVolume is a volume the spec asks for, with its mount in the main container.
type specVolume struct {
	volume corev1.Volume
	mount  corev1.VolumeMount
}

// specVolumes are the volumes the spec asks for, in order: the ConfigMap module, the cloud
// identity token, then the CLI configuration file, then the volumes of spec.job.podTemplate
// (all mounted only into the main container).
func specVolumes(p Params) []specVolume {
	var out []specVolume
	if cm := p.Spec.Module.ConfigMap; cm != nil {
		out = append(out, specVolume{
			volume: corev1.Volume{Name: volumeModule, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, DefaultMode: ptr.To[int32](0o444), Optional: ptr.To(false),
			}}},
			mount: corev1.VolumeMount{Name: volumeModule, MountPath: runnerapi.ModuleDir, ReadOnly: true},
		})
	}
	if id := p.Spec.Job.IdentityToken; id != nil {
		exp := DefaultIdentityTokenExpirationSeconds
		if id.ExpirationSeconds != nil {
			exp = *id.ExpirationSeconds
		}
		out = append(out, specVolume{
			volume: corev1.Volume{Name: VolumeIdentity, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o440),
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: id.Audience, ExpirationSeconds: ptr.To(exp), Path: runnerapi.IdentityTokenFile}}},
			}}},
			mount: corev1.VolumeMount{Name: VolumeIdentity, MountPath: runnerapi.IdentityDir, ReadOnly: true},
		})
	}
	out = append(out, cliConfigVolume(p)...)
	return append(out, podTemplateVolumes(p.Spec.Job.PodTemplate)...)
}

func containerSecurity(readOnlyRoot bool) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(readOnlyRoot),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// validate refuses Params that cannot build a Job, naming every fault it finds: checkRun (the
// owner and the run's identity), checkOperationParams (the parameters each operation alone
// takes) and checkPodParams (the images, the module and the job policy).
func validate(p Params) error {
	errs := checkRun(p)
	errs = append(errs, checkOperationParams(p)...)
	errs = append(errs, checkPodParams(p)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("build job: %w", err)
	}
	return nil
}

// checkRun checks the owner, the suffix, the sequence, the operation and the inputs hash.
func checkRun(p Params) []error {
	var errs []error
	o := p.Owner
	if o.APIVersion == "" || o.Kind == "" || o.Name == "" || o.Namespace == "" || o.UID == "" {
		errs = append(errs, errors.New("owner apiVersion, kind, name, namespace and uid are required"))
	}
	if len(p.Suffix) != naming.SuffixLength {
		errs = append(errs, fmt.Errorf("suffix %q is not a state suffix", p.Suffix))
	}
	if p.Seq < 0 {
		errs = append(errs, fmt.Errorf("negative sequence %d", p.Seq))
	}
	if !runnerapi.ValidOperation(string(p.Operation)) {
		errs = append(errs, fmt.Errorf("unknown operation %q", p.Operation))
	}
	if p.InputsHash == "" {
		errs = append(errs, errors.New("inputs hash is required"))
	}
	return errs
}

// checkOperationParams checks that a plan ID, refresh-only, destroy-plan, a refresh request and a state
// lineage come only with the operations that take them, and are well formed.
func checkOperationParams(p Params) []error {
	var errs []error
	if p.PlanID != "" {
		if runnerapi.JobPlanKind(string(p.Operation)) == "" {
			errs = append(errs, fmt.Errorf("a plan ID is for an Apply, a Refresh or a Destroy, not a %s", p.Operation))
		}
		if !runnerapi.ValidPlanID(p.PlanID) {
			errs = append(errs, fmt.Errorf("plan ID %q is not %d lowercase hex digits", p.PlanID, runnerapi.PlanIDLength))
		}
	}
	if p.RefreshOnly && p.Operation != infrav1.OperationPlan && p.Operation != infrav1.OperationDrift {
		errs = append(errs, fmt.Errorf("refresh-only is for a Plan or a Drift check, not a %s", p.Operation))
	}
	if p.DestroyPlan && (p.Operation != infrav1.OperationPlan || p.RefreshOnly) {
		errs = append(errs, fmt.Errorf("a destroy plan is made by a Plan that is not refresh-only, not a %s", p.Operation))
	}
	if p.RefreshRequest != "" && p.Operation != infrav1.OperationPlan && p.Operation != infrav1.OperationRefresh {
		errs = append(errs, fmt.Errorf("a refresh request is for a Plan or a Refresh, not a %s", p.Operation))
	}
	if p.Target != "" {
		if p.Operation != infrav1.OperationApply && (p.Operation != infrav1.OperationPlan || p.RefreshOnly || p.DestroyPlan) {
			errs = append(errs, fmt.Errorf("a targeted operation is carried out by an Apply or its plan, not a %s", describeOp(p)))
		}
		if _, err := runnerapi.ParseTarget(p.Target); err != nil {
			errs = append(errs, fmt.Errorf("targeted operation %q: %w", p.Target, err))
		}
	}
	if p.StateLineage != "" {
		if p.Operation == infrav1.OperationRestore {
			errs = append(errs, errors.New("a restore replaces the state: it takes no state lineage"))
		}
		if !runnerapi.ValidLineage(p.StateLineage) {
			errs = append(errs, fmt.Errorf("state lineage %q is not 1 to %d printable characters", p.StateLineage, runnerapi.MaxLineageLength))
		}
	}
	return errs
}

// checkPodParams checks the runner image, that the module is exactly one of an image and a
// ConfigMap, that spec.job.env sets no reserved name, the identity token's settings, and
// spec.job.podTemplate (ValidatePodTemplate, the admission webhook's rule).
func checkPodParams(p Params) []error {
	var errs []error
	if p.RunnerImage == "" {
		errs = append(errs, errors.New("runner image is required"))
	}
	m := p.Spec.Module
	switch {
	case (m.Image == "") == (m.ConfigMap == nil):
		errs = append(errs, errors.New("set exactly one of module.image and module.configMap"))
	case m.ConfigMap != nil && len(validation.IsDNS1123Subdomain(m.ConfigMap.Name)) > 0:
		errs = append(errs, fmt.Errorf("module.configMap.name %q is not a ConfigMap name", m.ConfigMap.Name))
	}
	for _, e := range p.Spec.Job.Env {
		if IsReservedEnv(e.Name) {
			errs = append(errs, fmt.Errorf("spec.job.env sets %s, which CAPTF reserves", e.Name))
		}
	}
	errs = append(errs, checkIdentityEnv(p)...)
	if id := p.Spec.Job.IdentityToken; id != nil {
		if id.Audience == "" {
			errs = append(errs, errors.New("spec.job.identityToken.audience is required"))
		}
		if e := id.ExpirationSeconds; e != nil && *e < MinTokenExpirationSeconds {
			errs = append(errs, fmt.Errorf("spec.job.identityToken.expirationSeconds %d is below %d", *e, MinTokenExpirationSeconds))
		}
	}
	errs = append(errs, checkCLIConfig(p.Spec.Job.CLIConfig)...)
	for _, e := range ValidatePodTemplate(field.NewPath("spec", "job", "podTemplate"), p.Spec.Job.PodTemplate) {
		errs = append(errs, e)
	}
	return errs
}

// StateLineageOf is the state lineage a Job's state channel serves alone (its
// --state-lineage, which Build writes from Params.StateLineage); "" when it serves whatever
// the state Secret holds, or the Job has no state channel.
func StateLineageOf(job *batchv1.Job) string {
	prefix := "--" + runnerapi.FlagStateLineage + "="
	for _, c := range job.Spec.Template.Spec.InitContainers {
		if c.Name != ChannelContainer {
			continue
		}
		for _, arg := range c.Command {
			if v, ok := strings.CutPrefix(arg, prefix); ok {
				return v
			}
		}
	}
	return ""
}

// canonicalTarget is the canonical form of the request p.Target (checkOperationParams read it
// already) when on, else "".
func canonicalTarget(req string, on bool) string {
	t, err := runnerapi.ParseTarget(req)
	if !on || req == "" || err != nil {
		return ""
	}
	return t.String()
}

// describeOp names the Job's operation, with the kind of plan for a Plan.
func describeOp(p Params) string {
	switch {
	case p.Operation == infrav1.OperationPlan && p.RefreshOnly:
		return "refresh-only Plan"
	case p.Operation == infrav1.OperationPlan && p.DestroyPlan:
		return "destroy Plan"
	}
	return string(p.Operation)
}
