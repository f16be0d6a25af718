// Package chaos holds the tests that stop managers mid-write, race two managers without
// leader election, starve a manager's cache, and soak many seeded object lifecycles under
// injected faults, each against a real API server with the invariant monitor of test/monitor,
// which replays what the API server recorded (I1-I5 and I7 of ARCHITECTURE.md, checked at
// every version in etcd revision order; monitor_test.go wraps it for the specs).
//
// The soak (soak_test.go, `make soak`; a fixed slice of 8 schedules in `make test`) runs
// schedules: one object's lifecycle (create, input change, pause, state loss and restore,
// delete, re-create, delete) under a fault plan drawn from the schedule's seed (stale or
// hidden cache reads, refused, lost or conflicting writes, a crash after a write, failed
// Jobs, when the second manager first sees the object). The executor plays the Job controller
// and the kubelet (envtest has neither) and the test plays the garbage collector. A run fails
// on any violation and on any schedule that does not finish, and prints the seed that replays
// it.
package chaos
