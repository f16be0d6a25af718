// Package sim is the home of CAPTF's deterministic simulator (issue 47): CAPTF's real
// reconcilers, webhooks and lease code running inside a testing/synctest bubble, against an
// in-memory API server, so that one seed fully determines a run and a million fault schedules
// fit in hours.
//
// Its sub-packages, bottom up:
//
//   - apiserver: the in-memory API server's object store (client.WithWatch), proven against the
//     real kube-apiserver by a conformance table. It owns resourceVersions, generation,
//     the status subresource, deletion with finalizers, patches and watch ordering, and offers
//     hooks to the layers above (Options.Intercept, AfterWrite, Deliver, Mutate, Validate);
//     they do not change its semantics.
//   - informer: per-reader informer caches fed by the store's watches through Deliver with
//     seeded lags, never back in time for one reader; informer.Client is a manager's client
//     (reads from its cache, writes to the store).
//   - admission: CAPTF's real webhooks (package webhooks) as the store's admission chain
//     (Mutate, Validate), routed as config/webhook routes them; requests carry a user.
//   - kcm: kube-controller-manager's observable parts: the Job controller (seeded runs on the
//     bubble's clock) and the garbage collector.
//   - runner: what a Job's pod does that the controller observes: a seeded run that succeeds,
//     crashes, is killed or outruns activeDeadlineSeconds, the state channel's lineage check,
//     and the state Secret (serial, contract outputs) a run leaves; kcm makes the end
//     observable as Job conditions.
//   - faults: a seed's fault schedule (pure): cache lags, manager kills and restarts, B joining
//     late, write faults in the chaos soak's vocabulary, preemptions that interleave the two
//     managers' passes, a person's steps (input change, pause, delete) and the runs' outcomes.
//
// This package's tests stack them. reconcile_test.go: CAPTF's TerraformCluster reconciler
// (controllers/engine) in a bubble over a lagging cache and the store with its webhooks, until
// its first apply Job starts; two managers without leader election for five minutes. TestSim
// (sim_test.go, schedule_test.go, schedule_drive_test.go; make sim, and a slice of seeds 1-100
// plus one derived from the commit in make test) plays whole schedules: two managers, each an
// incarnation (cold cache, reconciler) that a kill or a crash after a write ends and a restart
// replaces, passes run one at a time by a driver on the bubble's clock when a manager's cache
// applied an event or its requeue is due (errors back off as controller-runtime's rate limiter
// does), faults injected through the store's Intercept and AfterWrite, runs played by kcm and
// runner. The store's own watches (not the caches) record every version of Jobs, the
// TerraformCluster and Secrets, which test/monitor's checks replay (I1-I5, I7: the soak's
// definitions, monitor.Recorder) with S1 (the finalizer never dropped while the state records
// a managed resource); a schedule that is not Ready and idle (or gone, when deleted) within 30
// minutes of bubble time after its last step counts as unconverged. One seed gives one trace,
// line for line (TestSimReplaysBitForBit); a failing seed prints its schedule, its trace and
// make sim SEED=<seed> SCHEDULES=1. The managers' writes CAPTF's webhooks refuse are counted
// (guard denials): the engine tried what the guard stops.
//
// Still to come: TerraformMachine and TerraformMachinePool (I5 across a cluster and its
// members), drift checks, state loss and restore, clusterctl move, the runner's result document
// and pods (the engine reads a finished Job without them), the garbage collector in the
// schedules, interleavings inside a webhook's reads, the finalizer point of the soak's
// vocabulary (a request names no finalizer change), one generator shared with make soak, and
// a million schedules.
package sim
