// Package stalecache is a test double for the manager's informer cache: it wraps the cache's
// reader and hides chosen objects or serves an older copy of them, while writes and the live
// API reader still reach the real API server. It reproduces, in process, the stale views an
// informer shows behind a slow watch (the Sieve approach, without interposing on the API
// server).
//
// Rules are added and removed at run time; every hidden read is counted, so a test can show
// that the lag it injected was actually seen.
//
// Invariants it keeps, so that it shows only views an informer can:
//
//   - A Reader is monotonic per object: once it has served a version of an object, it never
//     serves an older copy of it, whatever a rule answers (the current one is served instead).
//   - Wired to the cache's events (Reader.Informing), a Reader counts a version as delivered
//     right before an event handler sees it and never serves an older copy afterwards, so a
//     pass an event triggers reads that version or a newer one. The lag then lives where an
//     informer has it, before the event (Reader.DelayEvents delays events in order).
//   - Hiding is not bound by these: a rule that hides an object (a Job the cache has not seen
//     yet) hides it whatever was served before.
package stalecache
