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
//
// This package's own test (reconcile_test.go) stacks them: CAPTF's TerraformCluster reconciler
// (controllers/engine) runs in a bubble over a lagging cache and the store with its webhooks,
// until its first apply Job is started by the Job controller model; two runs of one seed give
// the same trace, write for write and instant for instant. Two such managers without leader
// election (caches lagging differently, passes interleaved) run for five minutes of the
// bubble's time per seed, and no Job is ever created beside an unfinished one.
//
// Still to come: pods and the runner (terraform) as a model, the state channel, the seeded
// fault scheduler (manager kills, two managers, API errors, clusterctl move, ...), the
// invariant checks, and make sim.
package sim
