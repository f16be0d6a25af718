// Package monitor is the invariant monitor the chaos and e2e suites share. It watches, through
// the API server, every Job, every pod of a Job (labelled batch.kubernetes.io/job-name), every
// TerraformCluster, TerraformMachine and TerraformMachinePool and every Terraform state Secret,
// then replays what it recorded in resourceVersion order (etcd's global revision) and checks,
// at every version, the invariants of ARCHITECTURE.md:
//
//   - I1: at most one Job of an object runs at a time.
//   - I2: while a Job of an object runs, the object carries block-move.
//   - I3: while a Job of an object runs, the object exists and keeps its finalizer.
//   - I4: while a Job runs, status.activeJob does not move off it.
//   - I5: no mutating Job (apply, destroy, restore) of a TerraformCluster runs while a mutating
//     Job of one of its Cluster's machines or pools runs.
//   - I7: an object that has applied before starts no apply, plan or drift Job against a state
//     Secret that holds no state, unless the Job's state channel checks the lineage the
//     controller read (then the channel refuses the state: counted in Result.Refused).
//
// A run lasts from its Job's creation until the Job has ended (a Complete or Failed condition,
// or deleted) and every pod of it is Succeeded, Failed or deleted: a Job deleted with
// --cascade=orphan runs as long as its pod does, and a pod on a lost node, never terminal,
// runs until it is deleted (the conservative reading). A pod belongs to the Job its
// batch.kubernetes.io/controller-uid label names (the Job controller sets it), else to the
// latest Job of its job-name label's name when first seen (envtest's simulated pods). With no
// pods, a Job runs until it ends.
//
// It keeps one small fact per change that matters to the checks (a status write that changes
// none of block-move, the finalizer, status.activeJob, the applied hash, a pod's terminality or
// existence is dropped), so it can watch a soak of thousands of objects. A watch the API
// server closes is resumed from the last version seen; a gap it cannot resume is reported as a
// violation.
//
// Use: Start before the namespaces to check exist (the watches start at the current version),
// then Check once with the namespaces. Check fences first: it writes one object of each
// watched kind into a namespace of its own and waits until every watch delivered it, so every
// earlier change is recorded. The fence objects carry no owner labels, the Job is suspended
// and the pod is gated from scheduling. A running CAPTF manager reconciles the fence's three
// kinds but starts nothing for them: they have no owning Cluster, so they wait for one (the
// e2e specs check with the sandbox's manager running). Stop ends the watches without a check. The
// package returns errors and imports no test framework.
package monitor
