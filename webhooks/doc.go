// Package webhooks owns CAPTF's admission webhooks: the guard against unbacked removals, the
// Lease guard, the Job guard, defaulting on create, and spec validation for the three reconciled
// kinds and their templates. Setup registers all of them with a manager; the controller-gen
// markers in setup.go plus the kustomize patches in config/webhook describe how the API server
// calls them.
//
// The guard (validating, CREATE and UPDATE of TerraformCluster, TerraformMachine,
// TerraformMachinePool, UPDATE of their /status) refuses a request that removes the
// clusterctl.cluster.x-k8s.io/block-move annotation, clears or changes status.activeJob, or
// removes the provider finalizer, unless live evidence backs it. The Lease guard refuses changing (holder, duration, times, labels,
// annotations) or deleting a CAPTF run or cluster Lease while it is live. The Job guard refuses
// changing a managed Job's CAPTF labels or controller owner reference. The guard also judges
// approvals of saved plans (captf.io/approve-plan, plans.go), the adopt opt-in (adopt.go), the
// abandon, and every write of the manager's records (records.go), on update and on create.
//
// Invariants:
//   - Evidence is read through the API server (mgr.GetAPIReader()), never a cache, and judged by
//     controllers/runlease (Manager.RunEvidence, Manager.JudgeLease, Assess): the controller and
//     the webhooks apply one set of lease rules.
//   - A guarded removal is allowed only when no live run lease of the object has a holder Job
//     of this object that runs (or has a non-terminal pod) or may still be created (lease inside
//     the grace, Job not on the API server), and no Job named by the old status.activeJob runs
//     or has a non-terminal pod. A change of status.activeJob to the live lease's holder is not
//     a removal of evidence and passes when the old Job no longer runs.
//   - A Lease is judged as it was before the request, with its owner found from its name
//     (runlease.OwnerOfLease), never from its labels alone; a lease inside its grace blocks as
//     it blocks a removal on the object.
//   - The manager's own identity (Options.ManagerServiceAccount, else the Pod's from the
//     environment, else the API server's SelfSubjectReview) passes the Lease and Job guards
//     before anything is read; the object guard never trusts it and judges the evidence.
//   - The Job guard reads nothing; deleting a Job is never intercepted; the garbage collector
//     (GarbageCollectorUsers) may only drop owner references.
//   - A reading error denies (fail closed); a request that removes or changes nothing guarded
//     is allowed whatever runs, so a mis-scoped matchCondition can slow writes but never refuse
//     them.
//   - The break-glass path allows a denied request only for a member of a configured group that
//     also sets captf.io/guard-override-reason in the request (for a Lease deletion or /status,
//     on the object); every use is logged and emitted as a Warning event (not on dry-run
//     requests: the webhooks declare no side effects), carried as the audit annotation
//     OverrideAuditKey, and counted as "overridden" (Measured counts and times every verdict of
//     the three guards once, by guard and outcome).
//   - A request that sets captf.io/approve-plan or changes its value is allowed only from a
//     member of Options.PlanApproverGroups (none by default: nobody), and only when the value is
//     the ID of the pending plan in the old object's captf.io/pending-plan; an admitted approval
//     is logged and recorded as a Normal PlanApproved event (not on dry-run requests). Removing
//     the annotation is not judged.
//   - The manager's records are one list, infrav1.ManagerRecordAnnotations; the guard's Go rules
//     and its matchCondition use it (TestGuardMatchConditionNamesTheRecords keeps the
//     condition equal to it). A record is set, changed or removed only by the manager's own
//     identity or an override group member, except that removing captf.io/retry-at (retry now)
//     is anyone's, and clusterctl move's source patch may drop the lineage records.
//   - A CREATE is judged as an update from nothing (DiffRecords from empty marks, JudgeRecords):
//     an object that carries a record or a guarded request (approve-plan, adopt-state,
//     abandon-infrastructure) is created only by the manager or an override group member
//     (clusterctl move). The records rule reads nothing and is judged before everything else.
//   - A request that sets captf.io/adopt-state or changes its value (the opt-in that lets an
//     object take over a state it never wrote) is allowed only from a member of the override
//     groups (adopt.go); it reads nothing.
//   - A template's spec.template.metadata.annotations carries no record or guarded request
//     (ValidateTemplateMetadata), and its spec.job.identityRef is judged like its objects'.
//   - The ValidatingAdmissionPolicy of config/policy holds the approver-group rule from the
//     ConfigMap PlanApproversConfigMap (kept by cmd/manager/setup), without the webhook.
//   - Defaulting is idempotent: applying it twice equals applying it once.
//   - Spec validation is a set of pure functions returning field.ErrorList; the update of a
//     deleting object is never refused for its spec.
package webhooks
