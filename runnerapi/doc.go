// Package runnerapi is the contract between a CAPTF Job and the runner binary inside it: the
// runner's command line (one function builds it, the runner parses the same flag names), the
// paths and input keys the Job mounts, the runner's exit codes, the result document the
// runner writes to its termination log and the controller parses back, and the saved plan: the
// plan Secret's keys and annotations, the plan ID, the plan summary and the channel's plan
// endpoint documents.
//
// It depends on the standard library only, so the runner binary stays small and the controller
// never imports runner internals.
//
// Invariants: an encoded Result is at most MaxResultBytes long (the kubelet keeps only that much
// of a termination message), is valid JSON, and keeps the end of the error text when it has to
// cut, and drops summary addresses before it cuts the error; a PlanSummary in a Result lists at
// most MaxResultAddresses, in a PlanRecord at most MaxRecordAddresses; PlanID is a pure function
// of the plan file's SHA-256, the inputs hash, the state serial and the lineage; the operation
// and outcome strings equal api/v1alpha1's Operation and RunOutcome values.
package runnerapi
