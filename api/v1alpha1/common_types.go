package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Well-known names shared by the controller, the webhooks and the runner.
const (
	// Finalizer is the provider finalizer: it keeps an object (and its Terraform state) until
	// its destroy Job succeeded, or until a move or an explicit abandon hands the state over.
	Finalizer = "infrastructure.cluster.x-k8s.io/captf"

	// BlockMoveAnnotation tells `clusterctl move` to wait: CAPTF sets it while work may start
	// and removes it only when no Job of the object runs.
	BlockMoveAnnotation = "clusterctl.cluster.x-k8s.io/block-move"

	// DeleteForMoveAnnotation is set by `clusterctl move` on source objects it deletes; such a
	// deletion never destroys infrastructure.
	DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

	// PausedAnnotation pauses reconciliation of one object (Cluster API's annotation).
	PausedAnnotation = clusterv1.PausedAnnotation

	// ManagedByAnnotation marks an infrastructure cluster that someone other than its provider
	// manages (Cluster API's annotation; ExternallyManaged).
	ManagedByAnnotation = clusterv1.ManagedByAnnotation

	// ClusterNameLabel names the owning Cluster (Cluster API's label).
	ClusterNameLabel = clusterv1.ClusterNameLabel

	// GuardOverrideReasonAnnotation, set by a member of an allowed group, forces a guarded
	// removal during an incident. Every use is logged and emitted as a Warning event.
	GuardOverrideReasonAnnotation = "captf.io/guard-override-reason"

	// RestoreStateAnnotation asks for a restore: its value is the serial of one of the object's
	// state backups (status.stateBackups). The controller runs a Restore Job that pushes that
	// backup, and removes the annotation once it succeeded.
	RestoreStateAnnotation = "captf.io/restore-state"

	// RefreshAnnotation asks for one refresh: a refresh-only apply that records in the state
	// what changed outside Terraform and changes no infrastructure (a Refresh Job, exclusive
	// with every other state writer; under applyPolicy Manual through a saved refresh-only
	// plan and approval). Its value is free (a timestamp, a ticket): the Job records it, and
	// the controller removes the annotation once that Job succeeded, unless the value changed
	// meanwhile (then the new request runs too). An object that never applied refreshes after
	// its first apply. See docs/drift.md.
	RefreshAnnotation = "captf.io/refresh"

	// DriftCheckAnnotation asks for one drift check now: the next pass that finds the object
	// otherwise idle (no Job running, no apply, restore or refresh wanted, the state read)
	// starts a Drift Job, whatever the interval, the jitter and the spread of overdue checks
	// say, and in every spec.drift.mode; an interval of 0 turns off only the schedule, not a
	// check asked for. Its value is free (a timestamp, a ticket): the Drift Job records it, and
	// bookkeeping removes the annotation once that Job ended, succeeded or failed (a failed
	// check is an answer too, and is not retried), unless the value changed meanwhile (then the
	// new request runs too). An object that never applied is checked after its first apply.
	// See docs/drift.md.
	DriftCheckAnnotation = "captf.io/drift-check"

	// TargetOperationAnnotation asks for one targeted operation on the object's state, carried
	// out by its next apply: "replace <address>" (the resource instance is destroyed and
	// created again, `-replace`) or "import <address> <id>" (the existing object is imported to
	// the address by an import block). Exclusive with every other state writer, backed up
	// before and after like any apply, and planned first, then approved, when the object's
	// plans are judged (applyPolicy Manual, destructiveChanges RequireApproval, a plan policy).
	// It waits for the object's first apply (there is no state to target before). Bookkeeping
	// removes it once the apply that carried it ended (succeeded or failed: status.lastRun
	// says which), or a plan of it failed, unless the value changed meanwhile. The admission webhook refuses a value
	// runnerapi.ParseTarget does not read. See docs/state.md, "Targeted operations".
	TargetOperationAnnotation = "captf.io/target-operation"

	// ApprovePlanAnnotation approves a pending plan: its value is status.pendingPlan.id. Only
	// members of the approver groups (--plan-approver-groups) may set it.
	ApprovePlanAnnotation = "captf.io/approve-plan"

	// AbandonInfrastructureAnnotation, set to the object's UID, lets the object go without a
	// destroy and keeps its state: an audited abandon. It applies only when it is meant now: on
	// an object that is being deleted, or that holds because of its state (StateReadable=False,
	// StateLost or an unreadable state). The admission webhook accepts it only from the
	// override groups (--guard-override-groups), and only on such an object: a dormant abandon
	// on a healthy object is refused. The engine removes one that got past (Warning event
	// AbandonVoided), and one set before the deletion began on an object its state does not
	// hold, so a later ordinary delete destroys (docs/deletion.md).
	AbandonInfrastructureAnnotation = "captf.io/abandon-infrastructure"

	// AdoptStateAnnotation, set to the lineage of a state the object finds but never wrote (a
	// state kept by deletionPolicy Retain or an abandon, or left by another incarnation of the
	// same name), lets the object take that state over: its first Job runs on top of it,
	// pinned to that lineage. Without it such an object holds (StateReadable=False,
	// RetainedStateFound) and runs nothing. Adopting someone else's infrastructure is an
	// audited act: the admission webhook accepts it only from the override groups
	// (--guard-override-groups). See docs/state.md.
	AdoptStateAnnotation = "captf.io/adopt-state"

	// DestroyWithoutPlanAnnotation, set to the object's UID, is the break-glass path of a
	// destroy judged like an apply (docs/deletion.md): a deleting object that asks for its
	// plans to be judged (applyPolicy Manual, destructiveChanges RequireApproval, or a plan
	// policy that selects it) destroys without a saved destroy plan, as an object that asks
	// for nothing does. For a destroy whose plan cannot be made, or is held as corrupt. The
	// admission webhook accepts it only from the override groups (--guard-override-groups);
	// the engine honours it only on a deleting object, with a Warning event.
	DestroyWithoutPlanAnnotation = "captf.io/destroy-without-plan"

	// StateLineageAnnotation is the lineage of the state the object wrote (its first Job that
	// moved the state), adopted (AdoptStateAnnotation), or restored last. The controller
	// writes it, and holds the object (StateReadable=False, StateLineageChanged) when the state
	// turns up with another lineage outside a restore. An annotation, not status: it survives
	// clusterctl move.
	StateLineageAnnotation = "captf.io/object-state-lineage"

	// StateLineageSeenAnnotation is set by the controller when the state a Job left has
	// another lineage than StateLineageAnnotation (and removed once a Job leaves the object's
	// own lineage again): it makes the next passes read the state live, so an idle object
	// whose state was replaced is held (StateLineageChanged) at once, not at its next Job.
	StateLineageSeenAnnotation = "captf.io/state-lineage-seen"

	// StateFirstRunAnnotation is set by the controller, as "<object UID>/<Job>", when it starts
	// the object's first mutating Job while no state exists: whatever state exists afterwards
	// was written by that Job, even when the Job's result is never counted (the Job deleted
	// with --cascade=orphan while its pod runs on). The object then records that state's
	// lineage as its own instead of holding with RetainedStateFound. It counts only for the
	// incarnation whose UID it names, and it goes once the lineage is recorded. Only the manager
	// and the override groups may set or change it.
	StateFirstRunAnnotation = "captf.io/state-first-run"
	// BackupDueAnnotation names the last mutating Job counted while the object was paused: its
	// state was not backed up then, because a backup taken while clusterctl move waits is made
	// after the move discovered what to carry and would stay behind in the source. The first
	// pass that is not paused (in this cluster, or in a move's target, which receives the
	// annotation with the object) backs up the state as it is and removes the annotation. Only
	// the manager and the override groups may set, change or remove it.
	BackupDueAnnotation = "captf.io/backup-due"

	// StateProtectionFinalizer keeps the state Secret, its backups and the durable inputs
	// Secret until the controller lets them go: after a successful destroy, a Retain deletion
	// or an audited abandon. A `kubectl delete secret` of a protected Secret waits.
	StateProtectionFinalizer = "captf.io/state-protection"
)

// Labels and annotations CAPTF writes on the objects it creates (Jobs, Leases, Secrets, Pods).
const (
	// ManagedLabel ("true") marks everything CAPTF creates; the manager caches only Jobs with it.
	ManagedLabel = "captf.io/managed"
	// WatchFilterLabel is Cluster API's watch-filter label: a manager started with
	// --watch-filter=<value> caches and reconciles only the objects (and their Jobs and Secrets)
	// that carry it with that value. CAPTF copies an object's value onto the Jobs and Secrets it
	// makes for it.
	WatchFilterLabel = clusterv1.WatchLabel
	// OwnerKindLabel and OwnerNameLabel name the TerraformCluster, TerraformMachine or
	// TerraformMachinePool a Job, Lease or Secret belongs to. Names longer than a label value
	// allows are shortened by a hash (see controllers/naming).
	OwnerKindLabel = "captf.io/owner-kind"
	OwnerNameLabel = "captf.io/owner-name"
	// OperationLabel carries the Operation of a Job.
	OperationLabel = "captf.io/operation"
	// LeaseLabel is "run" or "cluster" on CAPTF's Leases.
	LeaseLabel = "captf.io/lease"
	// LeaseOpAnnotation records the operation a lease was taken for.
	LeaseOpAnnotation = "captf.io/lease-op"
	// LeaseAcquiredAtAnnotation records when the holder last took or refreshed the lease (RFC 3339).
	LeaseAcquiredAtAnnotation = "captf.io/lease-acquired-at"
	// InputsHashAnnotation carries the hash of the inputs a Job runs with.
	InputsHashAnnotation = "captf.io/inputs-hash"
	// RefreshOnlyAnnotation ("true") marks a Plan or Drift Job that runs a refresh-only plan; its
	// result is reported on DriftJobSucceeded, like a refresh's.
	RefreshOnlyAnnotation = "captf.io/refresh-only"
	// DestroyPlanAnnotation ("true") marks a Plan Job that makes a destroy plan (`plan
	// -destroy`) for a deleting object whose destroy is judged like an apply.
	DestroyPlanAnnotation = "captf.io/destroy-plan"
	// RunSeqAnnotation, on a reconciled object, is the sequence number of its next Job: the Job
	// name is derived from it, so the name does not change while the object waits for a lease.
	RunSeqAnnotation = "captf.io/run-seq"
)

// Annotations the controller keeps on reconciled objects. They hold what must survive a
// `clusterctl move` and a restart (a move drops status), so status is never load-bearing.
const (
	// AppliedHashAnnotation is the inputs hash of the last successful apply. Its presence
	// means the object has applied before.
	AppliedHashAnnotation = "captf.io/applied-hash"
	// DestroyedAnnotation ("true") is set once a destroy Job of the object succeeded.
	DestroyedAnnotation = "captf.io/destroyed"
	// FailuresAnnotation counts consecutive failed Jobs (it drives the backoff).
	FailuresAnnotation = "captf.io/failures"
	// RetryAtAnnotation is when a failed operation may run again (RFC 3339).
	RetryAtAnnotation = "captf.io/retry-at"
	// LastErrorAnnotation keeps the last failed Job's redacted message (at most 1 KiB), so the
	// backoff condition can say why even when a status patch was lost.
	LastErrorAnnotation = "captf.io/last-error"
	// LastDriftCheckAnnotation is when the last drift check finished (RFC 3339): the durable
	// record the drift schedule counts from, which survives a move and a restart.
	LastDriftCheckAnnotation = "captf.io/last-drift-check"
	// DriftFindingAnnotation is the durable record of the last drift check's finding and of
	// what came of it (DriftRecord, JSON): the DriftDetected condition is computed from it.
	DriftFindingAnnotation = "captf.io/drift-finding"
	// HealthRecordAnnotation is the durable record of the module's health samples
	// (HealthRecord, JSON; TerraformMachine): the last sample and the count of consecutive
	// unhealthy ones. InfrastructureHealthy, Ready and status.health are computed from it.
	HealthRecordAnnotation = "captf.io/health"
	// PendingPlanAnnotation is the durable record of the plan that waits for approval (JSON:
	// its ID, the inputs hash, state serial and lineage it was made against, its counts and
	// addresses); status.pendingPlan reports it.
	PendingPlanAnnotation = "captf.io/pending-plan"
	// AppliedPlanAnnotation is the ID of the last plan an apply Job ran: a plan is applied at
	// most once.
	AppliedPlanAnnotation = "captf.io/applied-plan"
	// PlanIDAnnotation, on an apply Job, names the saved plan it applies.
	PlanIDAnnotation = "captf.io/plan-id"
	// RemediateAnnotation names the drift Job whose drift an apply must remediate (Remediate
	// mode); the controller removes it once that apply succeeded.
	RemediateAnnotation = "captf.io/remediate"
	// RestoreFailedAnnotation records the serial whose restore failed; a restore of that serial
	// is not tried again until the restore-state annotation names another serial.
	RestoreFailedAnnotation = "captf.io/restore-failed"
	// EndpointFromOutputsAnnotation marks a TerraformCluster's spec.controlPlaneEndpoint that the
	// controller filled from the module's output; such an endpoint is not fed back into the
	// module's inputs (it would change the inputs hash after every first apply).
	EndpointFromOutputsAnnotation = "captf.io/endpoint-from-outputs"
)

// Labels and annotations of the state backups (Secrets captf-state-backup-<suffix>-<serial>).
const (
	// SecretRoleLabel says what a CAPTF Secret holds: one of the SecretRole* values.
	SecretRoleLabel = "captf.io/secret-role"
	// BackupSerialAnnotation, BackupLineageAnnotation, BackupJobAnnotation and
	// BackupTimeAnnotation describe a backup: the state's serial and lineage, the Job after
	// which it was taken, and when (RFC 3339).
	BackupSerialAnnotation  = "captf.io/state-serial"
	BackupLineageAnnotation = "captf.io/state-lineage"
	BackupJobAnnotation     = "captf.io/source-job"
	BackupTimeAnnotation    = "captf.io/backup-time"
	// BackupBytesAnnotation is the size of the backup's compressed state.
	BackupBytesAnnotation = "captf.io/state-bytes"
	// RetainedAnnotation ("true") marks the state, durable inputs and backups the controller
	// let go of after a Retain deletion or an abandon: nothing deletes them any more.
	RetainedAnnotation = "captf.io/retained"
)

// Values of SecretRoleLabel.
const (
	SecretRoleState       = "state"
	SecretRoleStateBackup = "state-backup"
	SecretRoleInputs      = "inputs"
	SecretRoleOutputs     = "outputs"
	SecretRolePlan        = "plan"
)

// MoveLabel makes `clusterctl move` move a Secret (or ConfigMap) along with the cluster
// (clusterctl's label).
const MoveLabel = "clusterctl.cluster.x-k8s.io/move"

// VariablesLabel, set to "true", opts a Secret or ConfigMap in as a variablesFrom source: CAPTF
// reads no other, so an object's author cannot feed another workload's Secret into a module.
const VariablesLabel = "captf.io/variables"

// RunnerAccountLabel, set to "true", opts a ServiceAccount in as the account of an object's
// Jobs (spec.job.serviceAccountName): CAPTF binds the runner's Role to it, so the label is the
// account owner's consent.
const RunnerAccountLabel = "captf.io/runner"

// Lease kinds, the values of LeaseLabel.
const (
	LeaseKindRun     = "run"
	LeaseKindCluster = "cluster"
)

// Operation is what a Job does to an object's infrastructure.
// +kubebuilder:validation:Enum=Apply;Destroy;Plan;Refresh;Drift;Restore
type Operation string

// The operations CAPTF runs as Jobs.
const (
	OperationApply   Operation = "Apply"
	OperationDestroy Operation = "Destroy"
	OperationPlan    Operation = "Plan"
	OperationRefresh Operation = "Refresh"
	OperationDrift   Operation = "Drift"
	OperationRestore Operation = "Restore"
)

// Mutating reports whether the operation may change infrastructure or state. Mutating
// operations of a cluster and of its machines never overlap while the operation gate is on.
// A refresh changes no infrastructure but writes the state, so it is one of them.
func (o Operation) Mutating() bool {
	switch o {
	case OperationApply, OperationDestroy, OperationRestore, OperationRefresh:
		return true
	}
	return false
}

// Background reports whether the operation is scheduled background work (drift checks) rather
// than something a person or a Cluster asked for: it runs within --max-background-jobs, and its
// failure does not count toward the object's failure backoff. A refresh writes the state
// and answers a request or a finding, so it is not background: it takes an ordinary Job slot
// and fails like an apply.
func (o Operation) Background() bool {
	return o == OperationDrift
}

// Condition is the condition that reports a Job of the operation: DriftJobSucceeded for drift
// checks and refreshes, RestoreJobSucceeded for restores, ApplyJobSucceeded for the others.
func (o Operation) Condition() string {
	switch o {
	case OperationRefresh, OperationDrift:
		return DriftJobSucceededCondition
	case OperationRestore:
		return RestoreJobSucceededCondition
	}
	return ApplyJobSucceededCondition
}

// ModuleSource says where the Terraform root module comes from. Exactly one of image and
// configMap is set.
// +kubebuilder:validation:XValidation:rule="has(self.image) != has(self.configMap)",message="set exactly one of module.image and module.configMap"
type ModuleSource struct {
	// image is a container image that holds the root module and a terraform or tofu binary.
	// The Job runs this image as its main container.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// configMap names a ConfigMap in the object's namespace whose keys are the module's files.
	// It suits small modules and the local sandbox; the Job runs the manager's runtime image
	// with the files mounted.
	// +optional
	ConfigMap *ConfigMapModule `json:"configMap,omitempty"`

	// path is the module's folder inside the image (default: the image's working directory).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._/-]*$`
	Path string `json:"path,omitempty"`
}

// ConfigMapModule references a ConfigMap holding module files.
type ConfigMapModule struct {
	// name of the ConfigMap, in the object's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VariablesSource reads Terraform variables from a Secret or a ConfigMap in the object's
// namespace. Each key becomes a variable; values are parsed as JSON when they parse, else kept
// as strings. Exactly one of secretRef and configMapRef is set.
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.configMapRef)",message="set exactly one of secretRef and configMapRef"
type VariablesSource struct {
	// secretRef names a Secret whose keys are variables.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// configMapRef names a ConfigMap whose keys are variables.
	// +optional
	ConfigMapRef *LocalObjectReference `json:"configMapRef,omitempty"`
	// optional, when true, lets the source be missing; otherwise a missing source blocks runs.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// The defaults of spec.job, the one place the code reads them: the Job builder, the start's
// run lease request, the lease backstop and the webhooks' defaulting and validation. The
// schema's +kubebuilder:default markers on JobPolicy must say the same (a marker cannot name a
// constant; the schema test checks the API server's defaults against these).
const (
	// DefaultActiveDeadlineSeconds is spec.job.activeDeadlineSeconds when it is not set.
	DefaultActiveDeadlineSeconds int64 = 3600
	// DefaultLockTimeoutSeconds is spec.job.lockTimeoutSeconds when it is not set.
	DefaultLockTimeoutSeconds int64 = 300
	// DefaultJobsHistory is spec.job.successfulJobsHistory and spec.job.failedJobsHistory when
	// they are not set.
	DefaultJobsHistory int32 = 1
)

// JobPolicy shapes the Jobs CAPTF runs for an object.
// +kubebuilder:validation:XValidation:rule="!has(self.lockTimeoutSeconds) || !has(self.activeDeadlineSeconds) || self.lockTimeoutSeconds < self.activeDeadlineSeconds",message="lockTimeoutSeconds must be below activeDeadlineSeconds"
type JobPolicy struct {
	// activeDeadlineSeconds bounds each Job's run time. It also sets the run lease's backstop
	// (deadline + 600 s termination grace + 5 min).
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// lockTimeoutSeconds is how long terraform/tofu waits for the state lock.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86399
	LockTimeoutSeconds *int64 `json:"lockTimeoutSeconds,omitempty"`

	// serviceAccountName runs the Job under this service account instead of the runner account
	// CAPTF manages. It must be allowed to read and write Secrets and Leases in the namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// resources of the main container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// identityToken mounts a projected ServiceAccount token with a chosen audience into the
	// main container, for cloud workload identity (AWS IRSA, GCP and Azure workload identity
	// federation). An audience the Kubernetes API server accepts is refused: a well-known one
	// (kubernetes.default.svc and its variants), or any audience for which a short-lived probe
	// token passes a TokenReview against the API server's own audiences. The admission webhook
	// refuses it and the controller checks again before every Job (InputsValid=False, reason
	// IdentityAudienceRefused, and a Warning event), so module code never holds a Kubernetes
	// credential (docs/jobs.md, "Cloud identity tokens", names the tests that prove it).
	// +optional
	IdentityToken *IdentityToken `json:"identityToken,omitempty"`

	// successfulJobsHistory is how many finished successful Jobs to keep per operation; older
	// ones are deleted after they were counted.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	SuccessfulJobsHistory *int32 `json:"successfulJobsHistory,omitempty"`

	// failedJobsHistory is how many finished unsuccessful Jobs to keep per operation.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	FailedJobsHistory *int32 `json:"failedJobsHistory,omitempty"`

	// env adds environment variables to the main container (provider credentials, for example).
	// Names CAPTF sets itself are refused by the admission webhook. A Secret a variable reads
	// (valueFrom.secretKeyRef) must carry captf.io/variables=true and must not be a
	// ServiceAccount token; the Job reads its own copy of it (docs/jobs.md, "Secrets that reach
	// module code").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Env []corev1.EnvVar `json:"env,omitempty"`

	// cliConfig is the Terraform CLI configuration of the Jobs: a configuration file (private
	// registries, a provider mirror) and registry tokens, for the main container only.
	// See CLIConfig and docs/production.md.
	// +optional
	CLIConfig *CLIConfig `json:"cliConfig,omitempty"`

	// podTemplate places the Job's pod (nodeSelector, tolerations, affinity,
	// priorityClassName), names its image pull Secrets, labels and annotates it, and mounts
	// read-only ConfigMap or Secret volumes into the main container; see RunnerPodTemplate
	// for what it cannot carry and what is refused.
	// +optional
	PodTemplate *RunnerPodTemplate `json:"podTemplate,omitempty"`

	// identityRef names a cluster-scoped TerraformIdentity whose environment variables (values
	// from Secrets in the manager's namespace) the main container of every Job of the object
	// gets. The identity must allow the object's namespace (its allowedNamespaces): admission
	// refuses a reference from another namespace (webhooks test "refuses an identity reference
	// from a namespace the identity does not allow"), and the engine checks again before every
	// Job, destroys included (InputsValid=False with IdentityNotAllowed, IdentityNotFound or
	// IdentityInvalid, a Warning event, no Job: engine test "holds an object whose namespace
	// lost the label its identity selects"). A missing identity is only a warning at admission
	// (webhooks test "admits a reference to a missing identity with a warning"). See
	// docs/production.md, "Scoped identities".
	// +optional
	IdentityRef *TerraformIdentityRef `json:"identityRef,omitempty"`
}

// EffectiveActiveDeadlineSeconds is the deadline a Job runs with: spec.job.activeDeadlineSeconds,
// or DefaultActiveDeadlineSeconds when it is not set.
func (p JobPolicy) EffectiveActiveDeadlineSeconds() int64 {
	if p.ActiveDeadlineSeconds != nil {
		return *p.ActiveDeadlineSeconds
	}
	return DefaultActiveDeadlineSeconds
}

// EffectiveLockTimeoutSeconds is the lock timeout a Job runs with: spec.job.lockTimeoutSeconds,
// or DefaultLockTimeoutSeconds when it is not set.
func (p JobPolicy) EffectiveLockTimeoutSeconds() int64 {
	if p.LockTimeoutSeconds != nil {
		return *p.LockTimeoutSeconds
	}
	return DefaultLockTimeoutSeconds
}

// EffectiveJobsHistory is how many finished Jobs of each outcome the object keeps:
// spec.job.successfulJobsHistory and spec.job.failedJobsHistory, or DefaultJobsHistory for
// one that is not set.
func (p JobPolicy) EffectiveJobsHistory() (succeeded, failed int) {
	succeeded, failed = int(DefaultJobsHistory), int(DefaultJobsHistory)
	if p.SuccessfulJobsHistory != nil {
		succeeded = int(*p.SuccessfulJobsHistory)
	}
	if p.FailedJobsHistory != nil {
		failed = int(*p.FailedJobsHistory)
	}
	return succeeded, failed
}

// IdentityToken is a projected ServiceAccount token for a cloud provider, never for the
// Kubernetes API server.
type IdentityToken struct {
	// audience of the token, as the cloud provider expects it (for example sts.amazonaws.com).
	// An audience the Kubernetes API server accepts is refused (see identityToken).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Audience string `json:"audience"`

	// expirationSeconds of the token; the kubelet rotates it before it expires.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=600
	// +kubebuilder:validation:Maximum=86400
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
}

// ApplyPolicy says whether changes apply at once or wait for approval.
// +kubebuilder:validation:Enum=Automatic;Manual
type ApplyPolicy string

// The apply policies.
const (
	ApplyPolicyAutomatic ApplyPolicy = "Automatic"
	ApplyPolicyManual    ApplyPolicy = "Manual"
)

// DestructiveChanges says whether an automatic apply may delete or replace resources.
// +kubebuilder:validation:Enum=Allow;RequireApproval
type DestructiveChanges string

// The destructive-change settings.
const (
	DestructiveChangesAllow           DestructiveChanges = "Allow"
	DestructiveChangesRequireApproval DestructiveChanges = "RequireApproval"
)

// DeletionPolicy says what deleting the object does to its infrastructure.
// +kubebuilder:validation:Enum=Destroy;Retain
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionPolicyDestroy runs a destroy Job, then deletes the state.
	DeletionPolicyDestroy DeletionPolicy = "Destroy"
	// DeletionPolicyRetain lets the object go without a destroy and keeps its state, durable
	// inputs and backups (no longer owned by anything) for a person to take over.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// StateReplication says whether a run may start while the replica store cannot take the
// state (docs/state.md, "Strict replication").
// +kubebuilder:validation:Enum=BestEffort;Strict
type StateReplication string

// The state replication modes.
const (
	// StateReplicationBestEffort (the default, also when unset): a store that is down never
	// holds a run; the replica catches up when it returns.
	StateReplicationBestEffort StateReplication = "BestEffort"
	// StateReplicationStrict: a Job that writes the state starts only once the store answers
	// and holds the state version the run starts from.
	StateReplicationStrict StateReplication = "Strict"
)

// DriftMode says what a drift check does when it finds drift.
// +kubebuilder:validation:Enum=Report;Remediate;Accept
type DriftMode string

// The drift modes.
const (
	DriftModeReport    DriftMode = "Report"
	DriftModeRemediate DriftMode = "Remediate"
	// DriftModeAccept checks with a refresh-only plan (the infrastructure against the state)
	// and, when something changed outside Terraform, records it in the state with a
	// refresh-only apply (a Refresh Job) instead of changing the infrastructure back.
	DriftModeAccept DriftMode = "Accept"
)

// DriftPolicy schedules drift checks: a plan against the inputs of the last apply, run as a
// Job that changes nothing (docs/drift.md).
type DriftPolicy struct {
	// interval between drift checks of an object that applied; unset uses the manager's
	// --drift-interval (0 there disables them). A check is due once the interval plus a
	// per-object jitter of up to 10% has passed since the last one (annotation
	// captf.io/last-drift-check).
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// mode: Report sets DriftDetected=True when a check finds drift; Remediate also runs one
	// apply of the last applied inputs (through the normal apply path: leases, gate, backoff).
	// Accept checks with a refresh-only plan (what changed outside Terraform, compared with
	// the state) and, when it finds a change, runs one refresh-only apply that records it in
	// the state and changes no infrastructure (a Refresh Job: the run lease, the cluster
	// gate, backups before and after; under applyPolicy Manual a saved refresh-only plan
	// that waits for approval). Tested by the engine spec "accepts drift with one refresh"
	// and the e2e spec "accepts an out-of-band change with a refresh" (docs/drift.md).
	// +optional
	// +kubebuilder:default=Report
	Mode DriftMode `json:"mode,omitempty"`
}

// TerraformSpec is the part of the spec every kind shares: the module and its inputs.
type TerraformSpec struct {
	// module is the Terraform/OpenTofu root module to run.
	// +required
	Module ModuleSource `json:"module"`

	// variables is a JSON object of Terraform variables.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Variables *runtime.RawExtension `json:"variables,omitempty"`

	// variablesFrom reads more variables from Secrets and ConfigMaps; later entries win, and
	// variables wins over all of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VariablesFrom []VariablesSource `json:"variablesFrom,omitempty"`

	// job shapes the Jobs that run the module.
	// +optional
	// +kubebuilder:default={}
	Job JobPolicy `json:"job,omitempty"`

	// drift schedules drift checks.
	// +optional
	// +kubebuilder:default={}
	Drift DriftPolicy `json:"drift,omitempty"`

	// applyPolicy says whether changes apply at once (Automatic, the default) or wait for a
	// person: under Manual every apply but the first runs a plan Job, and only the plan an
	// approver approves (annotation captf.io/approve-plan=<plan ID>) is applied (docs/plans.md).
	// +optional
	// +kubebuilder:default=Automatic
	ApplyPolicy ApplyPolicy `json:"applyPolicy,omitempty"`

	// destructiveChanges, under applyPolicy Automatic: RequireApproval plans every apply first
	// and applies at once only a plan that deletes and replaces nothing; a plan that would
	// delete or replace a resource waits for approval like Manual. Allow (the default) applies
	// directly.
	// +optional
	// +kubebuilder:default=Allow
	DestructiveChanges DestructiveChanges `json:"destructiveChanges,omitempty"`

	// deletionPolicy says what deleting the object does: Destroy (the default) destroys the
	// infrastructure first; Retain lets the object go and keeps the state for a person to take
	// over.
	// +optional
	// +kubebuilder:default=Destroy
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// stateReplication matters only when the manager keeps a replica store of the states
	// (--state-replica-*): BestEffort (the default, also when unset) never holds a run on the
	// store; Strict holds a Job that writes the state (an apply, a destroy, a refresh, a
	// restore) until the store can be listed and holds the state version the run starts from,
	// writing that version first when it is missing (docs/state.md, "Strict replication").
	// +optional
	StateReplication StateReplication `json:"stateReplication,omitempty"`
}

// Initialization reports the Cluster API contract's initialization fields.
type Initialization struct {
	// provisioned is true once the infrastructure has been provisioned; it is latched.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// ActiveJob names the Job that runs now.
type ActiveJob struct {
	// name of the Job.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// operation the Job runs.
	// +required
	Operation Operation `json:"operation"`
	// startTime is when the controller created the Job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// RunOutcome is how a Job ended.
// +kubebuilder:validation:Enum=Succeeded;Failed;Interrupted;Fenced
type RunOutcome string

// The outcomes of a Job.
const (
	RunSucceeded   RunOutcome = "Succeeded"
	RunFailed      RunOutcome = "Failed"
	RunInterrupted RunOutcome = "Interrupted"
	// RunFenced: the state channel refused the run's lock or state write because the object's
	// run lease no longer names the run's Job. Never counts toward the failure backoff.
	RunFenced RunOutcome = "Fenced"
)

// LastRun reports the last Job that finished.
type LastRun struct {
	// job is the Job's name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job"`
	// operation the Job ran.
	// +required
	Operation Operation `json:"operation"`
	// outcome of the Job.
	// +required
	Outcome RunOutcome `json:"outcome"`
	// finishedAt is when the Job finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// message is a redacted summary of the runner's result.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
	// target is the targeted operation the Job carried out (captf.io/target-operation), if
	// any.
	// +optional
	// +kubebuilder:validation:MaxLength=1400
	Target string `json:"target,omitempty"`
}

// TerraformStatus is the part of the status every kind shares.
type TerraformStatus struct {
	// initialization reports the Cluster API contract's provisioning.
	// +optional
	Initialization *Initialization `json:"initialization,omitempty"`

	// conditions of the object, with Cluster API v1beta2 semantics; Ready summarises them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// activeJob names the Job that runs now, if any.
	// +optional
	ActiveJob *ActiveJob `json:"activeJob,omitempty"`

	// lastRun reports the last finished Job.
	// +optional
	LastRun *LastRun `json:"lastRun,omitempty"`

	// pendingPlan is the saved plan that waits for approval, if any.
	// +optional
	PendingPlan *PendingPlan `json:"pendingPlan,omitempty"`

	// lastDriftCheck is when the last drift check finished (reported; the annotation
	// captf.io/last-drift-check is the record the schedule uses).
	// +optional
	LastDriftCheck *metav1.Time `json:"lastDriftCheck,omitempty"`

	// stateBackups lists the object's state backups, newest first (reported; the backup
	// Secrets themselves are the record).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	StateBackups []StateBackup `json:"stateBackups,omitempty"`

	// stateReplica lists the state versions the replica store was last seen to hold for this
	// object's namespace, kind and name, newest first (reported, at most 32): as the
	// controller last listed the store (before a Job that writes the state starts, and when a
	// new object looks for a state of its name) and wrote to it since. The store is the record;
	// a restore (captf.io/restore-state) of a serial it holds works whether listed here or not.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	StateReplica []StateReplicaVersion `json:"stateReplica,omitempty"`

	// observedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// inputs records what the inputs hash was last computed from, so that a manager, a
	// restarted one too, can tell from its caches alone that nothing changed since and read no
	// Secret's content (docs/lifecycle.md, "Idle objects read nothing"). Absent while a source
	// is out of the caches' sight (spec.variablesFrom, a bootstrap data Secret without the
	// cluster-name label): the sources are then read again 10 minutes after the last reading
	// at the latest.
	// +optional
	Inputs *InputsRecord `json:"inputs,omitempty"`
}

// InputsRecord pairs the sources of an inputs hash, as the manager's caches saw them, with the
// hash computed from them.
type InputsRecord struct {
	// sources is a digest of the object's generation, its Cluster's name, the contract inputs
	// taken from cached objects and the resourceVersions of the Secrets whose content goes
	// into the hash (the bootstrap data, the cluster's state).
	// +required
	// +kubebuilder:validation:MaxLength=128
	Sources string `json:"sources"`

	// hash is the inputs hash computed from those sources.
	// +required
	// +kubebuilder:validation:MaxLength=128
	Hash string `json:"hash"`

	// generation is the object's generation the record was made at (sources covers it too).
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// PendingPlan is a saved plan that waits for an approver.
type PendingPlan struct {
	// id of the plan: approve it with the annotation captf.io/approve-plan=<id>. It is a hash
	// of the plan file, the inputs and the state serial and lineage it was made against.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// job is the plan Job that made it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`
	// secret holds the plan file, its summary and its text (key plan.txt).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Secret string `json:"secret,omitempty"`
	// create, update, replace and delete count the resource changes of the plan.
	// +optional
	Create int32 `json:"create,omitempty"`
	// +optional
	Update int32 `json:"update,omitempty"`
	// +optional
	Replace int32 `json:"replace,omitempty"`
	// +optional
	Delete int32 `json:"delete,omitempty"`
	// import counts the resources the plan imports (a targeted operation's import).
	// +optional
	Import int32 `json:"import,omitempty"`
	// forget counts the resources the plan removes from the state and leaves standing (a
	// targeted operation's forget).
	// +optional
	Forget int32 `json:"forget,omitempty"`
	// addresses of the changed resources, sorted (at most 50).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Addresses []string `json:"addresses,omitempty"`
	// reason the plan waits: Manual, DestructiveChanges, or PolicyViolated (it breaks a rule of
	// a TerraformPlanPolicy; docs/plans.md, "Plan policies").
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// violations are the plan policy rules the plan breaks, as "<policy>/<rule>: <message>",
	// judged when the plan Job ended (engine test "a plan policy holds a plan that deletes a
	// database and lets a create-only plan apply").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=512
	Violations []string `json:"violations,omitempty"`
	// refreshOnly: a refresh-only plan (a refresh asked for with captf.io/refresh, or drift
	// mode Accept, under applyPolicy Manual). Approved, a Refresh Job applies it: the counts
	// are what changed outside Terraform (outputs count as updates, address output.<name>),
	// recorded in the state without changing the infrastructure. docs/drift.md.
	// +optional
	RefreshOnly bool `json:"refreshOnly,omitempty"`
	// destroy: a destroy plan, made when the object is deleted while it asks for its plans to
	// be judged (applyPolicy Manual, destructiveChanges RequireApproval, or a plan policy that
	// selects it). Approved (or let by), a Destroy Job applies it. docs/deletion.md.
	// +optional
	Destroy bool `json:"destroy,omitempty"`
	// target is the targeted operation the plan carries out (captf.io/target-operation:
	// "replace <address>" or "import <address> <id>"), as the plan Job's state channel recorded
	// it. docs/state.md, "Targeted operations".
	// +optional
	// +kubebuilder:validation:MaxLength=1400
	Target string `json:"target,omitempty"`
	// createdAt is when the plan Job finished.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}

// StateBackup is one backup of the object's state.
type StateBackup struct {
	// serial of the backed-up state; restore it with the annotation captf.io/restore-state.
	// +required
	Serial int64 `json:"serial"`
	// secret is the backup Secret's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Secret string `json:"secret"`
	// time the backup was taken.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// bytes of the compressed state.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
}

// StateReplicaVersion is one state version the replica store holds.
type StateReplicaVersion struct {
	// lineage of the state.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Lineage string `json:"lineage"`
	// serial of the state; restore it with the annotation captf.io/restore-state when it is of
	// the object's lineage.
	// +required
	Serial int64 `json:"serial"`
	// time the store received it.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// IsProvisioned reports status.initialization.provisioned.
func (s *TerraformStatus) IsProvisioned() bool {
	return s.Initialization != nil && s.Initialization.Provisioned != nil && *s.Initialization.Provisioned
}
