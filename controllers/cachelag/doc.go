// Package cachelag owns the live confirmations a pass makes before it clears block-move or
// status.activeJob, or drops a finalizer: the informer cache can trail the API server, so "no
// Job runs" read from the cache is only a hint until the API server agrees.
//
// Two checks (docs/cache-lag.md): status.activeJob names a Job the cached list lacks -> read
// that Job live; the run lease names a holder the cached list lacks -> judge the lease live
// with the runlease rules (the same rules the admission guard uses). Either finding a Job of
// this object that runs or may still be created is a lag: the caller changes nothing and looks
// again after a short requeue.
//
// Invariant: Check only reads; it never writes, so a wrong answer can only delay a clear.
package cachelag
