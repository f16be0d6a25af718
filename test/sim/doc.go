// Package sim is the home of CAPTF's deterministic simulator (issue 47): CAPTF's real
// reconcilers, webhooks and lease code running inside a testing/synctest bubble, against an
// in-memory API server, so that one seed fully determines a run and a million fault schedules
// fit in hours.
//
// Its sub-packages, bottom up:
//
//   - apiserver: the in-memory API server's object store (client.WithWatch), proven against the
//     real kube-apiserver by a conformance table. It owns resourceVersions, generation,
//     the status subresource, deletion with finalizers, patches and watch ordering.
//
// Later steps add informers with lag, admission (CAPTF's webhooks), the Job controller model and
// the seeded fault scheduler on top of apiserver's hooks (Options.Intercept, Options.AfterWrite,
// Options.Deliver); they do not change its semantics.
package sim
