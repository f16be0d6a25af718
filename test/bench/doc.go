// Package bench measures what the cache design promises, as Go benchmarks against a real API
// server (`make bench`): API requests per reconcile pass for an idle object, an object whose
// Job runs and a Job that just finished; and the manager's heap with and without 2,000
// foreign Jobs, label-scoped cache against an unscoped one, side by side in one run.
//
// Benchmarks are never run by `make test`; they only have to compile there.
package bench
