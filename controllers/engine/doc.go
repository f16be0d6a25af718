// Package engine is the reconcile pass shared by TerraformCluster, TerraformMachine and
// TerraformMachinePool: observe, decide, act.
//
// A pass gathers evidence (the object and its Jobs from the cache; live reads only where the
// answer can change what the pass does: gather.go builds a decide.Evidence), then the pure
// decision of controllers/decide (decide.Decide) picks what to do, then act.go carries the
// Decision out, and the status is computed by decide.SetConditions from the evidence, the
// decision and the pass's decide.Report. The engine keeps all the I/O: reads, writes, events,
// metrics, leases and Job slots. The per-kind controllers are thin adapters (the Kind
// interface) that supply contract inputs and map module outputs to contract fields.
//
// The pass (reconciler.go) holds the gathered evidence, the decision and the report, and runs the
// steps; each step that does not need the whole pass is a small type or function given exactly
// the clients and evidence it uses:
//   - state.Keeper (controllers/state): the state Secret's protection, backups, restore reads,
//     the inventory and the cleanup after a destroy;
//   - preparer (prepare.go): the inputs, credentials and Secrets a Job runs with, judged live,
//     and the per-run Secrets;
//   - planReader and policyGate (plan.go, planpolicy.go): reading a Plan Job's plan and judging
//     it by the plan policies;
//   - outbox (act.go): the events of the pass, sent only after the write they report;
//   - functions for the rest (gatherPendingPods, pruneHistory, livePaused, releaseFinished...).
//
// The engine judges nothing itself: every rule that picks an operation, shapes its Job or
// chooses an event is a pure function of controllers/decide (Decide, ObjectEvidenceOf,
// IdentityOf, Paused, BelongsToDestroy, RefreshOnly, WaitEvents, StartEvents,
// PlanSecretProblem...), tested there.
//
// Invariants this package keeps (ARCHITECTURE.md I1-I6):
//   - a Job is created only under the object's run lease (and, for a cluster's mutating
//     operation, the cluster lease), after block-move is on the object, after a live re-read of
//     pause, and after a live confirmation that the lease still names that Job;
//   - Job names come from the object's durable run sequence (annotation captf.io/run-seq), so a
//     repeated attempt after a crash or on a stale cache finds AlreadyExists and adopts;
//   - block-move, status.activeJob and the finalizer are removed only after the live checks of
//     the cachelag package say no Job of the object runs or may still be created;
//   - a deletion that is paused or part of a move never destroys and never deletes state; state
//     is deleted only after a successful destroy;
//   - what must survive a move (run sequence, applied inputs hash, failure backoff, the
//     lineage of the state the object wrote) lives in annotations and Secrets, never only in
//     status;
//   - nothing but a restore runs against a state the object never wrote and has not adopted
//     (captf.io/adopt-state naming its lineage: RetainedStateFound), nor against a state whose
//     lineage is not the one recorded in captf.io/object-state-lineage (StateLineageChanged);
//     that record is written once, by bookkeeping, and a restore brings back only its lineage;
//     a state the object never wrote is never destroyed or deleted without the opt-in.
package engine
