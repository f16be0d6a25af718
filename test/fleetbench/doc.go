// Package fleetbench measures a fleet's throughput end to end (`make bench`; a benchmark, never
// a gate, and not in `make test`): BenchmarkFleetThroughput creates N TerraformMachines at once
// in the sandbox (package test/sandbox: the control plane, the manager binary with its webhooks,
// the real kube-controller-manager, kube-scheduler and Cluster API managers, and the executor,
// which runs each Job's pod as local processes: the real runner and the real tofu or terraform)
// and reports the time until every one is Ready and the manager's peak heap, against the floor:
// the same number of runner executions of the same module at the same parallelism with no
// controller, in the same run.
//
// What runs:
//   - one sandbox, started with this checkout's manager and runner (built into a temporary
//     folder), the manager under --max-active-jobs=P and the soft memory limit a manager of
//     config/manager's Deployment sets itself (CAPTF_MEMORY_LIMIT of its 512Mi), its metrics
//     served on a loopback port;
//   - the floor first: for each of N objects of a namespace of its own, what the controller
//     prepares before a first apply (the runner ServiceAccount with its Role and RoleBinding,
//     the empty state and plan Secrets, the lock Lease, the run lease naming the run's Job, a
//     token of the ServiceAccount, the inputs a machine's Job receives) is written before the
//     clock starts; then P workers run, one object after another, the state channel (`runner
//     channel`) and the runner (`runner run --operation=Apply`) as the Job's pod runs them,
//     against the sandbox's API server: the clock stops when the last channel exited, and each
//     object's state is then checked to hold the provider_id output its apply wrote. No
//     controller, no Job, no Pod, no scheduler or executor;
//   - then the fleet: a Cluster and its TerraformCluster, applied and Ready before the clock
//     starts, then N Machines (bootstrap data given by name, one shared Secret) and their N
//     TerraformMachines, created by 8 workers; the clock runs from the first create until an
//     informer of the bench saw the last TerraformMachine Ready (condition Ready=True, which
//     the module's provider_id output fills), saying every 30 s how many are Ready, how many
//     Job runs have ended and the Ready reasons of the others;
//   - the manager's heap (go_memstats_heap_alloc_bytes: live objects and garbage not yet
//     collected, the measure of test/bench's BenchmarkFleetColdStart) and resident memory
//     (process_resident_memory_bytes) are read from its metrics endpoint every 500 ms while
//     the fleet runs: the peaks are of those samples.
//
// Settings (environment): CAPTF_BENCH_FLEET_N (default 1000), CAPTF_BENCH_FLEET_PARALLEL (P,
// default 50, the manager's own default --max-active-jobs), CAPTF_BENCH_FLEET_BINARY (the
// tofu or terraform the runner runs; default CAPTF_TEST_TOFU, which the Makefile exports, else
// what sandbox.FindTerraform picks).
//
// It prints a table (N, P, binary, time to all Ready, floor time, their ratio, peak heap and
// peak resident memory) and reports the same figures with b.ReportMetric; it asserts no time:
// a run fails only when an execution fails or the fleet does not become Ready. Every process it
// starts stops by itself: the floor's processes exit when their run ends (SIGTERM for the
// channel, as the executor stops a sidecar; the process tree is killed if the bench gives up),
// die with the bench (SIGKILL on the parent's death), and the sandbox is stopped when the
// benchmark ends, its control plane included.
package fleetbench
