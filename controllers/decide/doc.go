// Package decide is the reconcile pass's decision, fenced off from everything that reads or
// writes: the engine (controllers/engine) gathers an Evidence, calls Decide, and carries the
// Decision out. Everything here is a pure function of its arguments.
//
// It owns:
//   - Evidence, in named parts (Object, Jobs, Lag, Inputs, State, Plan, Drift, Retry), the
//     predicates that tell the engine which live reads can change the decision (NeedsPods,
//     NeedsLagCheck, NeedsDecisionInputs, NeedsLiveState), Decision and Decide;
//   - the judgements Decide and bookkeeping rest on: saved plans (NeedsPlan, Superseded) and the
//     one conversion path of a plan (PlanRecordOf, PendingPlanOf), the drift schedule
//     (DriftDueAt), the abandon rule (AbandonApplies, AbandonVoid, AbandonSetBefore), the state's
//     identity (RetainedState, LineageChanged, RecordLineage, ExpectedLineage), Job history
//     pruning (JobsToPrune), and what a finished Job means for the object's durable markers
//     (JudgeFinished, Bookkept.Markers, the failure backoff);
//   - the condition setters (SetConditions): the status of a pass is computed from the
//     evidence, the decision and the engine's Report of what acting did, and nothing else.
//
// Invariants it keeps (ARCHITECTURE.md I1-I9, as the engine's doc.go states them):
//   - Decide is pure: same evidence, same decision. Every branch that sets, keeps or clears
//     block-move, status.activeJob or the finalizer, and every start, bookkeeping or wait for a
//     Job, is decided in Decide and nowhere else;
//   - the only clock is Evidence.Now (and the times the engine passes in): no function here
//     reads the wall clock;
//   - nothing runs against a state the object never wrote and has not adopted, nor against a
//     state of another lineage than its own; a restore brings back only the object's lineage;
//   - a saved plan is applied at most once, only while it matches the inputs and the state,
//     and under applyPolicy Manual only once approved (I9);
//   - a running Job whose pod cannot pull its image (Evidence.Jobs.PullFailure) is reported
//     (ImagePullFailed) and waited for like any running Job: its marks stay, nothing is
//     cleared, failed or deleted; only a running Job with no ready pod has its pods read
//     (NeedsPendingPods);
//   - a running Job whose pod cannot start for another reason (Evidence.Jobs.StartBlock) is
//     reported (JobCannotStart) at once for a configuration error and after StartGrace for the
//     rest; a deleting object deletes such a Job, or one that cannot pull its image, only when
//     the pods prove that terraform never started (NeverStartedJobGoes, ActionDeleteJob), and
//     keeps block-move and status.activeJob while it does.
//
// What it may import (enforced by depguard in .golangci.yml, rule decide-is-pure): the standard
// library, api/v1alpha1, the Kubernetes apimachinery type packages (meta/v1, api/meta, types)
// and the stdlib-only runner wire API (runnerapi). No context, no client, no controller-runtime,
// no client-go, no clock package; forbidigo forbids time.Now, time.Since and time.Until here.
package decide
