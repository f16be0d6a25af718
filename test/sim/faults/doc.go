// Package faults draws the simulator's fault schedules: a pure function from a seed to a
// Schedule (Draw), with no clock, client or goroutine, so a seed names one schedule forever and
// a failing seed replays it. A Schedule says what test/sim's harness does to one
// TerraformCluster's life: its two managers (no leader election; B may join late), how far
// each manager's cache lags, the manager kills and how long each stays down (a restarted
// manager starts with a cold cache), faults on the managers' writes in the chaos soak's
// vocabulary (points: lease, release, meta, finalizer, status, inputs, job, run-secret,
// secret, cleanup; modes: fail, lost, conflict, crash; as test/chaos's soak_plan_test.go names
// them), preemptions (the other manager runs a whole pass between two requests of a pass),
// the steps a person takes (input change, pause and unpause, delete) and how the Jobs' runs
// end (test/sim/runner's crash, kill and overrun shares).
//
// # Invariants it keeps
//
//   - Draw is deterministic: the same seed gives the same Schedule (String included), on
//     every machine, whatever ran before.
//   - Steps are in time order, a pause is always followed by its unpause, nothing follows a
//     delete, and Settle is after every step, kill and restart.
//   - Conflicts hit only points whose writes carry a resourceVersion (as in the soak).
//
// # Not shared with the soak (yet)
//
// The soak's generator (test/chaos, newPlan) lives in package chaos_test's test files and draws
// against its step list (drift checks, state loss and restore, re-create) with math/rand; it
// is not importable, and moving it would change make soak's plans. This package keeps its
// vocabulary; folding both into one generator is left to a later slice of issue 47.
package faults
