// Package bench measures what the cache design promises, against a real API server, and gates
// it in `make test`.
//
// Gates (Test functions, run by `make test`; counts and ratios only, never times):
//   - TestRequestsPerPassGate: for a TerraformCluster, a TerraformMachine and a
//     TerraformMachinePool, a reconcile pass while the object's Job runs and an idle pass of the
//     provisioned object send 0 API requests. Every object reads a variablesFrom ConfigMap, so a
//     pass that reassembles its inputs instead of reusing the memoised hash is caught. The
//     manager keeps a state replica (an in-memory bucket): each state version the Jobs left is
//     written to the store once, and the idle and running passes still send nothing.
//   - TestManagerHeapWithForeignJobsGate: the manager's heap with 2,000 foreign Jobs (not
//     CAPTF's, 100 KB annotation each, suspended, each marked so by the Job controller) is at
//     most 1.10x its heap with none (median of three rounds each), which holds only while the
//     Job cache is scoped to captf.io/managed=true.
//   - TestFleetColdStartGate: a manager that starts cold on 200 applied objects (clusters,
//     machines and pools with everything a completed apply leaves, bootstrap data labelled
//     with the cluster name as Cluster API's contract asks) reconciles each once, writes
//     nothing, fills its cache with a fixed number of lists and watches, and reads nothing live
//     for any object (status.inputs still matches what the caches show), only the manager's own
//     start-up probe.
//   - TestShardsGate: the managers of two shards (--watch-filter=a, --watch-filter=b) over a
//     fleet labelled a, one labelled b and an unlabelled one reconcile every object of their
//     shard and none of the unlabelled fleet, and every request each sends is in a namespace
//     of its shard or a list or watch that selects its shard's label; restarted, each reads
//     nothing live and writes nothing.
//   - TestDriftRestartSpreadGate: a manager that restarts on 100 applied objects whose 1-minute
//     drift checks are all overdue starts at most 10 drift Jobs in its first 6 seconds (no Job
//     cap in the way), having looked at every object: overdue checks are spread, not started
//     at once (decide.DriftDueAt).
//   - TestJobSlotsBurstGate: 200 applied machines and pools get new inputs at once under
//     --max-active-jobs 20, their pods running until told: a watch of the Jobs sees never more
//     than 20 running, 20 start, the other 180 report WaitingForJobSlot, and when 5 Jobs end
//     (their pods fail) exactly 5 more start.
//
// Benchmarks (`make bench`, which runs no tests) print the same scenarios as tables: requests
// per pass of each kind while its Job runs, the passes that count a Job that just finished,
// and idle; and the heap with and without the foreign Jobs, label-scoped cache against an
// unscoped one, side by side in one run; and BenchmarkFleetColdStart, a cold start on 200,
// 2,000 and 10,000 applied objects (time until all were reconciled, requests by purpose, peak
// heap), by one manager and by the managers of two shards; and BenchmarkJobSlotsBurst, the
// burst of TestJobSlotsBurstGate as a table; and BenchmarkApplyWithReplica, the controller's
// part of an apply (a Job's end to its object provisioned) without a state replica and with one
// on the Versity S3 gateway of bin/, medians side by side and their ratio.
//
// One cluster serves the whole package (started by the first test or benchmark, stopped by
// TestMain): envtest's control plane, the real kube-controller-manager and kube-scheduler
// (package test/sandbox/kubecontrollers: the Job controller, the garbage collector, the
// namespace and ServiceAccount controllers and the rest act on the bench's objects as in a
// cluster), and one Node the bench plays the kubelet of (node_test.go): the scheduler binds the
// Jobs' pods to it, it writes their status through pods/status (running at once, ended when a
// test says how), and the Job controller completes or fails the Jobs. Nothing writes a Job's
// status but the Job controller. The request counts are the manager's own client's only (its
// transport is wrapped); the controllers', the node's and the fixtures' requests are not in
// them. The foreign Jobs are created once and stay for the rest of the package's run.
package bench
