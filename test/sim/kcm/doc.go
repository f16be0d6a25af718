// Package kcm models the parts of kube-controller-manager CAPTF's invariants observe: the Job
// controller (a Job created in the store starts, runs for a seeded duration on the bubble's
// clock, then succeeds, fails or exceeds its deadline, with the status the real controller
// writes) and the garbage collector (an object whose owners are all gone is deleted in the
// background; a dangling owner reference beside a live owner is dropped). Both act through a
// client of the simulated API server (test/sim/apiserver), so admission judges their writes as
// it judges the real controllers' (give them clients carrying their users: JobControllerUser,
// GarbageCollectorUser).
//
// # What it owns
//
// JobController: the start (status.startTime, active 1), the end (succeeded or failed 1,
// completionTime on success, the SuccessCriteriaMet/Complete or FailureTarget/Failed conditions
// with reasons CompletionsReached, BackoffLimitExceeded or DeadlineExceeded) of every Job, and
// the draw of each Job's run. GarbageCollector: the deletion of dependents of deleted owners
// among the kinds it is given.
//
// JobOptions.End lets a pod's model (test/sim/runner) act when a run ends, before the status
// that makes the end observable is written, as a pod's writes precede the Job controller's
// observation of its exit.
//
// # Invariants it keeps
//
//   - A Job's run (its duration and whether it fails) is a pure function of (Options.Seed, the
//     Job's namespace, name and uid): the order in which events reach the controller does not
//     change it. Durations are measured on the bubble's clock from status.startTime, so a
//     controller that starts again (a new JobController over the same store) finishes a running
//     Job when its first incarnation would have.
//   - A Job with spec.activeDeadlineSeconds whose run is not shorter than the deadline fails
//     with DeadlineExceeded at startTime + deadline; a suspended Job does not start; a finished
//     Job is never written again; a deleted Job's run stops.
//   - Status writes name the resourceVersion they read and the Job's uid (a Job deleted and
//     created again under the same name is a new Job); a Conflict is retried from a fresh read.
//   - The garbage collector deletes an object only when none of its owner references resolves
//     to a live owner of the same uid, with the dependent's uid as a precondition and
//     background propagation.
//
// # Not modelled
//
// Pods (a Job has no pods here: jobstatus sees no live pod of a finished Job), retries within
// backoffLimit (CAPTF's Jobs have backoffLimit 0: one failure fails the Job), parallelism and
// completions above 1, ttlSecondsAfterFinished, podFailurePolicy, foreground and orphan
// propagation, blockOwnerDeletion, and the garbage collector's periodic resync (it acts on watch
// events: the deletion of an owner, the creation or change of a dependent).
package kcm
