// Package stalecache is a test double for the manager's informer cache: it wraps the cache's
// reader and hides chosen objects or serves an older copy of them, while writes and the live
// API reader still reach the real API server. It reproduces, in process, the stale views an
// informer shows behind a slow watch (the Sieve approach, without interposing on the API
// server).
//
// Rules are added and removed at run time; every hidden read is counted, so a test can show
// that the lag it injected was actually seen.
package stalecache
