package v1alpha1

// Condition types. Ready summarises the others with Cluster API v1beta2 semantics: it is True
// only when the infrastructure is provisioned, the last apply succeeded and nothing blocks.
const (
	// ReadyCondition summarises the object.
	ReadyCondition = "Ready"
	// PausedCondition is True while the object or its Cluster is paused.
	PausedCondition = "Paused"
	// DeletingCondition is True while the object is being deleted and says what it waits for.
	DeletingCondition = "Deleting"
	// ApplyJobSucceededCondition reports the last apply, destroy or plan Job.
	ApplyJobSucceededCondition = "ApplyJobSucceeded"
	// DriftJobSucceededCondition reports the last refresh or drift Job.
	DriftJobSucceededCondition = "DriftJobSucceeded"
	// RestoreJobSucceededCondition reports the last restore Job.
	RestoreJobSucceededCondition = "RestoreJobSucceeded"
	// InputsValidCondition is False when the inputs cannot be assembled (a missing Secret, a
	// bad variable, inputs too large).
	InputsValidCondition = "InputsValid"
	// OutputsValidCondition is False when the module's outputs do not fit the contract.
	OutputsValidCondition = "OutputsValid"
	// DependenciesReadyCondition is False while the object waits for something it needs (its
	// Cluster, its TerraformCluster's infrastructure, its bootstrap data).
	DependenciesReadyCondition = "DependenciesReady"
	// DeletionBlockedCondition is True while a cluster's deletion waits for its machines.
	DeletionBlockedCondition = "DeletionBlocked"
	// DriftDetectedCondition (negative polarity) is True when the last drift check found the
	// infrastructure differs from what the last apply described; its message carries the
	// counts and up to 20 resource addresses.
	DriftDetectedCondition = "DriftDetected"
	// StateReadableCondition is False when the object's Terraform state cannot be used: lost,
	// corrupt, of an unknown layout, or locked by someone else.
	StateReadableCondition = "StateReadable"
	// InfrastructureHealthyCondition (TerraformMachine) reports the module's health output as
	// the last sample read it (after an apply or a drift check): True, False with the module's
	// message and the count of consecutive unhealthy samples, or Unknown (no sample yet, no
	// health output, or a value that does not fit the contract).
	InfrastructureHealthyCondition = "InfrastructureHealthy"
)

// Condition reasons.
const (
	// WaitingForRunLeaseReason: another Job of this object holds the run lease.
	WaitingForRunLeaseReason = "WaitingForRunLease"
	// WaitingForClusterOperationReason: a mutating Job of the TerraformCluster holds the cluster
	// lease; the machine or pool waits behind it.
	WaitingForClusterOperationReason = "WaitingForClusterOperation"
	// WaitingForMachineOperationsReason: the cluster holds the cluster lease and waits for the
	// mutating Jobs of its machines and pools in flight.
	WaitingForMachineOperationsReason = "WaitingForMachineOperations"

	// JobRunningReason: a Job runs now.
	JobRunningReason = "JobRunning"
	// JobSucceededReason: the last Job succeeded.
	JobSucceededReason = "JobSucceeded"
	// JobFailedReason: the last Job failed; the message carries the runner's reason.
	JobFailedReason = "JobFailed"
	// TargetOperationInvalidReason (ApplyJobSucceeded): the targeted operation asked for
	// (captf.io/target-operation) cannot be read; nothing runs for it until it is corrected or
	// removed.
	TargetOperationInvalidReason = "TargetOperationInvalid"

	// PausedReason and NotPausedReason explain the Paused condition.
	PausedReason    = "Paused"
	NotPausedReason = "NotPaused"

	// ProvisionedReason: the infrastructure is provisioned and Ready holds.
	ProvisionedReason = "Provisioned"
	// NotProvisionedReason: the infrastructure is not provisioned yet.
	NotProvisionedReason = "NotProvisioned"

	// WaitingForClusterReason: the owning Cluster is not set or not found.
	WaitingForClusterReason = "WaitingForCluster"
	// WaitingForClusterInfrastructureReason: a machine waits for its TerraformCluster.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: a machine waits for its Machine's bootstrap data Secret.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"

	// InputsTooLargeReason: the assembled inputs exceed the 1 MB a Secret can hold.
	InputsTooLargeReason = "InputsTooLarge"
	// InputsSourceMissingReason: a referenced Secret or ConfigMap does not exist.
	InputsSourceMissingReason = "InputsSourceMissing"
	// InvalidInputsReason: the inputs cannot be assembled (bad JSON, reserved names).
	InvalidInputsReason = "InvalidInputs"
	// VariablesSourceNotOptedInReason: a variablesFrom Secret or ConfigMap exists but does not
	// carry the label captf.io/variables=true, so CAPTF refuses to read it.
	VariablesSourceNotOptedInReason = "VariablesSourceNotOptedIn"
	// ModuleSecretRefusedReason: a Secret that would reach module code (spec.job.env,
	// spec.job.podTemplate volumes, spec.job.cliConfig, variablesFrom or a TerraformIdentity) is
	// a Kubernetes ServiceAccount token (its type, or the kubernetes.io/service-account.name
	// annotation); no Job starts until the reference names another Secret
	// (controllers/modulesecrets).
	ModuleSecretRefusedReason = "ModuleSecretRefused"
	// RunnerAccountMissingReason and RunnerAccountNotOptedInReason: spec.job.serviceAccountName
	// names a ServiceAccount that does not exist, or one without the label captf.io/runner=true.
	RunnerAccountMissingReason    = "RunnerAccountMissing"
	RunnerAccountNotOptedInReason = "RunnerAccountNotOptedIn"
	// IdentityAudienceRefusedReason: spec.job.identityToken.audience is one the Kubernetes API
	// server accepts (a well-known one, or a probe token of it passes a TokenReview), so the
	// token would be a Kubernetes credential of the Job's account in module code; no Job starts.
	IdentityAudienceRefusedReason = "IdentityAudienceRefused"

	// HealthyReason and UnhealthyReason explain InfrastructureHealthy True and False;
	// NoHealthSampleReason (no sample taken yet), NoHealthOutputReason (the module exports no
	// health output) and HealthOutputInvalidReason (the value does not fit the contract)
	// explain Unknown.
	HealthyReason             = "Healthy"
	UnhealthyReason           = "Unhealthy"
	NoHealthSampleReason      = "NoHealthSample"
	NoHealthOutputReason      = "NoHealthOutput"
	HealthOutputInvalidReason = "HealthOutputInvalid"
	// InfrastructureUnhealthyReason: Ready is False because the module reported unhealthy for
	// spec.health.unhealthyThreshold consecutive samples; Cluster API mirrors it into the
	// Machine's InfrastructureReady, which a MachineHealthCheck can act on.
	InfrastructureUnhealthyReason = "InfrastructureUnhealthy"

	// OutputMissingReason and OutputInvalidReason explain OutputsValid=False.
	OutputMissingReason = "OutputMissing"
	OutputInvalidReason = "OutputInvalid"

	// WaitingForMachinesReason: a deleting cluster waits for its machines and pools.
	WaitingForMachinesReason = "WaitingForMachines"
	// DestroyingReason: a destroy Job runs or is about to.
	DestroyingReason = "Destroying"
	// MoveReason: the deletion is part of a move; nothing is destroyed and state is kept.
	MoveReason = "Move"

	// CacheLagReason marks a pass that waited because the cache trails the API server.
	CacheLagReason = "CacheLag"

	// DependenciesReadyReason: everything the object needs exists and is ready.
	DependenciesReadyReason = "DependenciesReady"
	// InputsAssembledReason: the inputs were assembled and are valid.
	InputsAssembledReason = "InputsAssembled"
	// OutputsValidReason: the module's outputs fill the contract.
	OutputsValidReason = "OutputsValid"
	// NotDeletingReason: the object is not being deleted.
	NotDeletingReason = "NotDeleting"

	// StateReadableReason: the state Secret exists and reads as a state.
	StateReadableReason = "StateReadable"
	// NoStateYetReason: the object never applied, so it has no state yet.
	NoStateYetReason = "NoStateYet"
	// StateLostReason: the object applied before but its state Secret is gone. Nothing runs
	// against the missing state until a restore or an audited abandon.
	StateLostReason = "StateLost"
	// StateSecretMarkedForDeletionReason (an event, Warning): a live read found the state
	// Secret marked for deletion, kept by the protection finalizer; the object goes on using
	// it. Sent by each pass that reads the state live while it lasts.
	StateSecretMarkedForDeletionReason = "StateSecretMarkedForDeletion"

	// StateReplicatedCondition: the state version the last counted Job left is in the replica
	// store (only when the manager keeps a replica: --state-replica-bucket). False never holds a
	// run; it says why the store did not take the version.
	StateReplicatedCondition = "StateReplicated"
	// StateReplicatedReason: the store holds the version.
	StateReplicatedReason = "Replicated"
	// ReplicaUnavailableReason: the store could not be reached or refused the write.
	ReplicaUnavailableReason = "ReplicaUnavailable"
	// ReplicaConflictReason: the store holds another state under the same lineage and serial;
	// nothing was overwritten.
	ReplicaConflictReason = "ReplicaConflict"
	// ReplicaKeyRefusedReason: the store holds that version sealed with another key.
	ReplicaKeyRefusedReason = "ReplicaKeyRefused"
	// StateNotReplicatedReason (an event, Warning): the state a Job left did not reach the
	// replica store; the note names the Job, the serial and why.
	StateNotReplicatedReason = "StateNotReplicated"
	// StateCorruptReason: the state Secret is not gzip'd state JSON.
	StateCorruptReason = "StateCorrupt"
	// StateLayoutUnknownReason: the state Secret's keys are not the one tfstate key (a chunked
	// state of a newer backend, for example).
	StateLayoutUnknownReason = "StateLayoutUnknown"
	// StateLockedReason: the state lock is held by someone the runner may not break.
	StateLockedReason = "StateLocked"

	// DriftFoundReason and NoDriftReason explain DriftDetected; RemediatedReason: an apply
	// after a check that found drift succeeded.
	DriftFoundReason = "DriftFound"
	NoDriftReason    = "NoDrift"
	RemediatedReason = "Remediated"
	// AcceptedReason (DriftDetected=False): a refresh-only apply recorded the drift in the
	// state (mode Accept, or a refresh asked for with captf.io/refresh).
	AcceptedReason = "Accepted"
	// WaitingForJobSlotReason: the manager runs as many Jobs as --max-active-jobs (or, for
	// drift checks, --max-background-jobs) allows; the Job starts when a slot frees.
	WaitingForJobSlotReason = "WaitingForJobSlot"

	// PlanAwaitingApprovalReason (ApplyJobSucceeded): a saved plan waits for an approver.
	PlanAwaitingApprovalReason = "PlanAwaitingApproval"
	// PlanPolicyViolatedReason (ApplyJobSucceeded): the saved plan breaks a rule of a
	// TerraformPlanPolicy; it waits for an approver or a new plan (docs/plans.md).
	PlanPolicyViolatedReason = "PlanPolicyViolated"
	// PlanSupersededReason: the inputs or the state changed since the plan was made; it can no
	// longer be approved and a new plan follows.
	PlanSupersededReason = "PlanSuperseded"

	// RetainReason: the deletion keeps the infrastructure and the state (deletionPolicy Retain).
	RetainReason = "Retain"
	// AbandonedReason: an override group member abandoned the infrastructure; the state is kept.
	AbandonedReason = "Abandoned"
	// RestoreRefusedReason: the restore-state annotation names no usable backup.
	RestoreRefusedReason = "RestoreRefused"
	// RetainedStateFoundReason: an object that never wrote a state finds one (kept by a
	// Retain deletion or an abandon, or left by another incarnation of the same name). Nothing
	// runs against it until an override group member opts in with captf.io/adopt-state set
	// to its lineage; a deletion lets the object go without touching that state.
	RetainedStateFoundReason = "RetainedStateFound"
	// StateLineageChangedReason: the state's lineage is no longer the one the object wrote,
	// adopted or restored (captf.io/object-state-lineage), and no restore explains it: the
	// state was replaced (for example by a module that wrote another state). Nothing runs
	// against it until a restore of a backup of the object's own lineage.
	StateLineageChangedReason = "StateLineageChanged"
	// ReplicaStateFoundReason: an object that never wrote a state finds no state Secret, but
	// the replica store holds a state for its namespace, kind and name that still tracks
	// resources (a management cluster rebuilt from Git, for example). Nothing runs until an
	// override group member names its lineage in captf.io/adopt-state: the controller then
	// brings the newest version of that lineage back from the store as a backup and restores
	// it. A deletion lets the object go without touching the store.
	ReplicaStateFoundReason = "ReplicaStateFound"
	// ReplicaAheadReason: the replica store holds a newer version of the state's lineage than
	// the state Secret (a management cluster restored from an older backup, say): nothing that
	// writes the state runs until the store's version is restored (captf.io/restore-state).
	ReplicaAheadReason = "ReplicaAhead"
	// ReplicaRequiredReason: spec.stateReplication is Strict and the replica store cannot be
	// listed, or does not hold the state version a run would start from and cannot take it: the
	// Job that writes the state does not start until it can.
	ReplicaRequiredReason = "ReplicaRequired"
	// ReplicaImportedReason (an event, Normal): a state version was brought back from the
	// replica store as a backup of the object, and its restore asked for.
	ReplicaImportedReason = "ReplicaImported"
	// ReplicaUncheckedReason (an event, Warning): the replica store could not be read when a
	// new object looked for a state of its name there; the first apply goes on (the replica
	// never holds a run), and says so.
	ReplicaUncheckedReason = "ReplicaUnchecked"
)

// UndeclaredVariablesReason is the reason of the Warning event of a finished Job whose variables
// (spec.variables, spec.variablesFrom) include some the module does not declare: Terraform
// ignores them. The note names them; status.lastRun.message lists them too. It is no failure:
// the run's outcome stands (docs/module-contract.md).
const UndeclaredVariablesReason = "UndeclaredVariables"
