// Package jobs builds the Kubernetes Job that runs one operation of a TerraformCluster,
// TerraformMachine or TerraformMachinePool, and reads back how a Job ended.
//
// Build is a pure function of Params: the same Params give a byte-identical Job, named
// naming.JobName(suffix, seq), so a pass that retries after a crash or on a stale cache
// rebuilds the same Job and gets AlreadyExists instead of a second Job. The Job:
//   - never runs two pods at once and never retries: backoffLimit 0, podReplacementPolicy
//     Failed, restartPolicy Never;
//   - is owned by the object (controller, blockOwnerDeletion) and carries the owner labels, the
//     operation label and the inputs hash, on the Job and on its pod;
//   - gives terraform terminationGracePeriodSeconds 600 after SIGTERM, so an interrupted run
//     can stop cleanly and release the state lock;
//   - runs restricted-Pod-Security compatible (non-root UID 65532, no privilege escalation, all
//     capabilities dropped, RuntimeDefault seccomp);
//   - refuses user environment variables in ReservedEnv;
//   - gives a TerraformIdentity's variables (Params.IdentityEnv) to the main container only, as
//     references to the Job's per-run identity Secret, never as values, and marks the Job with
//     infrav1.IdentityRefAnnotation. CheckTerraformIdentity is the one rule admission and the engine
//     apply to spec.job.identityRef, and IdentityValues reads the values from the manager's
//     namespace;
//   - tells the state channel its operation and inputs hash, and only for an Apply of a saved
//     plan (Params.PlanID) passes --plan-id to runner and channel and annotates the Job with it.
//
// OutcomeOf reads how a Job ends: the condition that decided it (jobstatus.Decided, which
// counts the interim FailureTarget and SuccessCriteriaMet) and the runner's result from the
// main container's termination message (runnerapi.Result). An Outcome never says that a Job is
// over: FailureTarget and SuccessCriteriaMet precede the pods' termination, and a deleted Job's
// pod keeps running through its grace period. Whether a Job still runs is jobstatus's one rule
// (jobstatus.Finished, jobstatus.Runs on pods read live); callers judge with it before they
// clear anything.
package jobs
