// Package runner models what a CAPTF Job's pod does that the controller can observe: the
// runner (terraform or tofu behind the state channel) runs for a seeded time and then succeeds,
// crashes (exits non-zero, an apply sometimes after writing a state, as terraform persists
// what it did before an error), is killed (SIGKILL, exit 137, nothing written) or outruns the
// Job's activeDeadlineSeconds; the state channel refuses a state whose lineage is not the one
// the controller read. A Model plugs into test/sim/kcm's Job controller (JobOptions.Decide,
// JobOptions.End), which makes the end observable as the real Job controller does: the Job's
// Complete or Failed condition.
//
// # What it owns
//
// The outcome of every run (Draw) and the state Secret writes of runs that end: a successful
// apply leaves the contract outputs of the Job's kind (TerraformCluster: host and port;
// TerraformMachine: a providerID; TerraformMachinePool: providerIDs) at the next serial of the
// state's lineage; a successful destroy leaves an empty state at the next serial; plans, drift
// checks and restores leave the state alone. The state is written in the kubernetes backend's
// layout (controllers/state/statetest), which the engine's real reader reads.
//
// # Invariants it keeps
//
//   - A run's outcome and duration are a pure function of (Options.Seed, the Job's namespace,
//     name and uid): Decide and End agree without sharing memory, so a Job controller that
//     restarts plays the same run.
//   - A run whose Job names a state lineage (jobs.StateLineageOf) writes nothing when the state
//     Secret is missing or holds another lineage; it fails, as the state channel's refusal does.
//   - Serials only grow within a lineage: a write reads the Secret and writes serial+1.
//   - Nothing is written for a killed run or a run stopped by its deadline.
//
// # Not modelled
//
// Pods (no pod objects, so no termination message: the engine reads a finished Job without its
// result document), the lock Lease terraform takes, state backups written by the runner,
// plan Secrets and drift findings (a plan or drift Job succeeds with no result), restores
// (the backup is not copied back), module download and image pulls.
package runner
