// Package runnerapi is the contract between a CAPTF Job and the runner binary inside it: the
// runner's command line (one function builds it, the runner parses the same flag names), the
// paths and input keys the Job mounts, the runner's exit codes, and the result document the
// runner writes to its termination log and the controller parses back.
//
// It depends on the standard library only, so the runner binary stays small and the controller
// never imports runner internals.
//
// Invariants: an encoded Result is at most MaxResultBytes long (the kubelet keeps only that much
// of a termination message), is valid JSON, and keeps the end of the error text when it has to
// cut; the operation and outcome strings equal api/v1alpha1's Operation and RunOutcome values.
package runnerapi
