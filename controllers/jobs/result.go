package jobs

import "github.com/captf/cluster-api-provider-terraform/runnerapi"

// Result is the runner's result document (see runnerapi.Result).
type Result = runnerapi.Result

// LockBroken and LockHolder are the state lock parts of a Result.
type (
	LockBroken = runnerapi.LockBroken
	LockHolder = runnerapi.LockHolder
)

// PlanSummary and PlanRef are the plan parts of a Result.
type (
	PlanSummary = runnerapi.PlanSummary
	PlanRef     = runnerapi.PlanRef
)

// ParseResult decodes a runner result (a pod's termination message).
func ParseResult(b []byte) (Result, error) {
	return runnerapi.ParseResult(b)
}
