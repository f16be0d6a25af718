// Package runnerapi is the contract between a CAPTF Job and the runner binary inside it: the
// runner's command line (one function builds it, the runner parses the same flag names), the
// paths and input keys the Job mounts, the runner's exit codes, the result document the
// runner writes to its termination log and the controller parses back, and the saved plan: the
// plan Secret's keys and annotations, the plan ID, the plan summary and the channel's plan
// endpoint documents. It is also the one source of the layout of Terraform's kubernetes backend
// as CAPTF uses it (backend.go): the state Secret, lock Lease and plan Secret names, StateKey
// and the backend's labels and annotations, the state's size limits, the gzip codec of the
// state (EncodeState, DecodeState), the owner label value, and which pod phases are terminal.
// controllers/naming, controllers/state and the runner's state channel call these instead of
// spelling the layout again.
//
// It depends on the standard library only (lint rule runnerapi-is-stdlib), so the runner
// binary stays small and the controller never imports runner internals. It lives beside api/,
// not under controllers/, because both binaries import it.
//
// Invariants: an encoded Result is at most MaxResultBytes long (the kubelet keeps only that much
// of a termination message), is valid JSON, and keeps the end of the error text when it has to
// cut, and drops summary addresses before it cuts the error; a PlanSummary in a Result lists at
// most MaxResultAddresses, in a PlanRecord at most MaxRecordAddresses; PlanID is a pure function
// of the plan file's SHA-256, the inputs hash, the state serial and the lineage; the operation
// and outcome strings equal api/v1alpha1's Operation and RunOutcome values; DecodeState never
// returns more than MaxStateBytes and refuses what it cannot decode with a *DecodeError, never
// an empty state; every name is a pure function of the object's suffix.
package runnerapi
