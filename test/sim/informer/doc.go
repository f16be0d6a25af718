// Package informer is the simulator's model of controller-runtime's informer cache: a Cache per
// reader (a manager, a webhook, a test) holding the objects it has heard of from the store's
// watches (test/sim/apiserver), each event delayed by a lag drawn from a seed, so that a
// reconciler reads the stale states a real cache gives it. A Cache is a client.Reader; Client
// joins it with a writer into the client.Client a reconciler uses (reads from the cache, writes
// to the API server), as the manager's client does.
//
// # What it owns
//
// Per reader and per kind: the objects, the resourceVersion of the last event it applied, and
// the one watch that feeds it (opened at the first read of the kind, after a list, as a
// reflector does, and reopened from the last applied resourceVersion when it ends), scoped by a
// label selector where Options.Selectors names one (as the manager's cache scopes Jobs and
// Secrets to captf.io/managed=true). Deliver is
// the store's Options.Deliver hook that delays the events of a Cache's watches; other watches
// pass through it to the next hook.
//
// # Invariants it keeps
//
//   - Never back in time for one reader: the events of one kind are applied in resourceVersion
//     order and a read returns the state after the last applied one, so a read is at least as
//     new as every earlier read of the same reader (per kind; two kinds lag independently, as
//     two informers of one manager do). A reopened watch starts after the last applied event,
//     never before it, and never skips one (the store keeps its whole history).
//   - The lag of an event is a pure function of (Options.Seed, Options.Name, kind,
//     resourceVersion), never of goroutine scheduling or the wall clock: inside a
//     testing/synctest bubble one seed gives one sequence of cache states. Events of one watch
//     wait one after the other (a slow informer falls behind), events of different kinds
//     independently (they reorder across kinds).
//   - A read returns the reader's own copy; nothing a caller does to it reaches the cache.
//   - The first read of a kind returns only after the cache has listed it (the informer has
//     synced), like controller-runtime's cache reader; a failed list is retried every second
//     (the read waits, until its context ends).
//
// # Not modelled
//
// Field indexes (field selectors other than metadata.name and metadata.namespace are refused),
// resync periods, event handlers (a controller's watch sources), transforms, and
// ReaderFailOnMissingInformer (a read of any kind starts its informer). A Cache is a
// client.Reader, not a controller-runtime cache.Cache (no GetInformer).
package informer
