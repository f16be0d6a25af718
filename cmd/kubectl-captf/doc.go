// Command kubectl-captf is the kubectl plugin for CAPTF's day-2 work (`kubectl captf`): it
// shows an object's, a Cluster's, a namespace's or every namespace's state as a tree or a table,
// once or each time it changes (status), walks a Cluster's whole chain down to the Jobs and pods
// (trace), reads the pending plan (plan show), writes the requests the docs and runbooks
// describe (approve, refresh, drift check, retry, restore, abandon), shows a held state lock
// with the runbook's commands (unlock), prints a Job's log or the runner's result document
// (logs), says its own and the server's versions (version), and answers kubectl's completion
// of its words (cobra's __complete, run by hack/krew/kubectl_complete-captf).
//
// It owns the plugin's command line, its reads and its output formats; docs/cli.md describes
// every verb.
//
// Invariants:
//   - it writes only what a person could write with kubectl: one merge patch of one annotation
//     on a TerraformCluster, TerraformMachine or TerraformMachinePool, under the caller's own
//     credentials, so the admission webhook and the ValidatingAdmissionPolicy judge it exactly
//     as they judge kubectl annotate. It never writes status, Jobs, Leases or Secrets;
//   - every annotation it reads or writes is named by its constant in api/v1alpha1 (and the
//     plan Secret's keys and the lock Lease's annotations by runnerapi), never spelled here;
//   - approve names the ID of the plan that waits (the durable record the controller keeps),
//     never one the caller typed unless it is that plan, and refuses a plan that is already
//     applied, handed to a Job, or being superseded;
//   - status, trace and version only read; status --watch ends on an interrupt with the exit
//     code of the last report it printed;
//   - unlock never releases a lock: the state channel alone breaks a stale lock (I8), and a
//     person's release is a decision the runbook leaves to the person; it shows the evidence
//     and prints the runbook's commands.
package main
