package v1alpha1

import (
	"encoding/json"
	"slices"
)

// managerRecordAnnotations is the one list of the manager's records on a reconciled object
// (TerraformCluster, TerraformMachine, TerraformMachinePool): what the controller writes to
// remember what it did and what it found. Each decides what the next pass does, so a forged one
// makes the controller act on something that never happened. Every line says what the record
// makes the controller believe.
var managerRecordAnnotations = []string{
	AppliedHashAnnotation,         // the object applied these inputs: no apply runs, and a found state is its own
	DestroyedAnnotation,           // a destroy succeeded: a deletion lets the object go without one
	FailuresAnnotation,            // the consecutive failures the backoff counts
	RetryAtAnnotation,             // when the backoff ends (a person may remove it: kubectl captf retry)
	LastErrorAnnotation,           // the last failure's message, which conditions report
	LastDriftCheckAnnotation,      // when the last drift check finished: the schedule counts from it
	DriftFindingAnnotation,        // the drift finding DriftDetected is computed from
	HealthRecordAnnotation,        // the health samples InfrastructureHealthy and Ready are computed from
	PendingPlanAnnotation,         // the plan that waits for approval: what an approval is judged against
	AppliedPlanAnnotation,         // the last plan applied: a plan is applied at most once
	RemediateAnnotation,           // the drift Job whose finding the next apply or refresh acts on
	RestoreFailedAnnotation,       // a restore that failed and is not tried again
	RunSeqAnnotation,              // the next Job's sequence number, hence its name
	EndpointFromOutputsAnnotation, // the endpoint came from the module's output, so it is not fed back as an input
	StateLineageAnnotation,        // the lineage of the state the object owns
	StateLineageSeenAnnotation,    // a Job left another lineage: read the state live and hold
	StateFirstRunAnnotation,       // the first run started with no state: the state found afterwards is the object's own
	BackupDueAnnotation,           // a paused Job's state is not backed up yet: the next unpaused pass backs it up
}

// guardedRequestAnnotations are the requests a person writes that the admission guard judges
// by rules of their own (who may, and when): approving a plan, adopting a state the object never
// wrote, abandoning infrastructure, destroying without the destroy plan the object asks for.
// The other requests (restore-state, refresh, drift-check,
// guard-override-reason) are judged where they act, or only ask for what anyone may ask.
var guardedRequestAnnotations = []string{
	ApprovePlanAnnotation,
	AdoptStateAnnotation,
	AbandonInfrastructureAnnotation,
	DestroyWithoutPlanAnnotation,
}

// ManagerRecordAnnotations returns the manager's records on a reconciled object, the one list
// every guard path judges (webhooks: the guard's Go rules and its matchCondition in
// config/webhook/patches/guards.yaml, which a test keeps equal to it): setting, changing or
// removing one is allowed only to the manager's own identity and to the override groups, on
// update and on create. Annotations that are not on it, and why:
//
//   - block-move: the manager sets it, and its removal is judged on evidence of a running Job;
//     setting it only makes clusterctl move wait.
//   - delete-for-move and paused: Cluster API's and clusterctl's, written by them.
//   - restore-state, refresh, drift-check, guard-override-reason: a person's requests.
//   - approve-plan, adopt-state, abandon-infrastructure, destroy-without-plan: a person's
//     requests with rules of their own (GuardedRequestAnnotations).
//   - inputs-hash, plan-id, refresh-only, identity-ref, lease-op, lease-acquired-at: on Jobs and
//     Leases, never read from the reconciled object (the Job and Lease guards judge those).
//   - retained and the backup annotations (state-serial, state-lineage, source-job, backup-time,
//     state-bytes): on Secrets, never on the reconciled object.
//
// It returns a new slice on every call.
func ManagerRecordAnnotations() []string { return slices.Clone(managerRecordAnnotations) }

// GuardedRequestAnnotations returns the person-written requests the guard judges by rules of
// their own: approve-plan, adopt-state, abandon-infrastructure and destroy-without-plan. An object may be created with
// none of them, except by the manager and the override groups (clusterctl move). It returns a
// new slice on every call.
func GuardedRequestAnnotations() []string { return slices.Clone(guardedRequestAnnotations) }

// IsManagerRecordAnnotation reports whether key is one of ManagerRecordAnnotations.
func IsManagerRecordAnnotation(key string) bool {
	return slices.Contains(managerRecordAnnotations, key)
}

// parseRecord reads a record annotation holding JSON of T; nil when it is empty or not that JSON.
// The caller then checks what its record needs.
func parseRecord[T any](s string) *T {
	if s == "" {
		return nil
	}
	r := new(T)
	if err := json.Unmarshal([]byte(s), r); err != nil {
		return nil
	}
	return r
}

// recordAnnotation is a record as its annotation holds it: JSON, "" if it cannot be encoded.
func recordAnnotation(r any) string {
	b, err := json.Marshal(r)
	if err != nil {
		return ""
	}
	return string(b)
}
