package runner

import (
	"time"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs/runnerapi"
)

// Step names.
const (
	StepInit      = "init"
	StepApply     = "apply"
	StepDestroy   = "destroy"
	StepPlan      = "plan"
	StepRefresh   = "refresh"
	StepStatePull = "state-pull"
	StepStatePush = "state-push"
)

// Step is one terraform/tofu command of an operation.
type Step struct {
	Name string
	Args []string
	// DetailedExitCode: the command runs with -detailed-exitcode, so exit code 2 means
	// "succeeded, with changes".
	DetailedExitCode bool
	// Capture keeps the command's stdout in memory instead of printing it (`state pull` prints
	// the whole state, secrets included).
	Capture bool
}

// StepOptions are the paths and settings the commands need.
type StepOptions struct {
	VarFile     string
	LockTimeout time.Duration
	// PushFile is the state file `state push` reads (restore only); the runner writes it after
	// `state pull`.
	PushFile string
	// BackendConfig are init's -backend-config key=value settings (the state channel's).
	BackendConfig []string
}

// Steps is the one place that maps an operation to terraform/tofu commands.
func Steps(op string, o StepOptions) ([]Step, error) {
	lock := "-lock-timeout=" + runnerapi.FormatSeconds(o.LockTimeout)
	vars := "-var-file=" + o.VarFile
	// -reconfigure: use the backend as configured now and never offer to migrate a state from
	// a backend recorded in a .terraform folder that came with the module.
	init := Step{Name: StepInit, Args: []string{"init", "-input=false", "-no-color", "-reconfigure"}}
	for _, kv := range o.BackendConfig {
		init.Args = append(init.Args, "-backend-config="+kv)
	}
	switch op {
	case runnerapi.OperationApply:
		return []Step{init, {Name: StepApply, Args: []string{"apply", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationDestroy:
		return []Step{init, {Name: StepDestroy, Args: []string{"apply", "-destroy", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationPlan, runnerapi.OperationDrift:
		// A drift check is a full plan: it reports what an apply would change, which honours
		// ignore_changes and is exactly what Remediate would fix. (A refresh-only plan would
		// also flag attributes the module does not manage.)
		return []Step{init, {Name: StepPlan, Args: []string{"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars}, DetailedExitCode: true}}, nil
	case runnerapi.OperationRefresh:
		return []Step{init, {Name: StepRefresh, Args: []string{"apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationRestore:
		return []Step{
			init,
			{Name: StepStatePull, Args: []string{"state", "pull"}, Capture: true},
			// Never -force: planRestore has made the pushed state acceptable without it.
			{Name: StepStatePush, Args: []string{"state", "push", lock, o.PushFile}},
		}, nil
	}
	return nil, badInput("unknown operation %q (want one of %v)", op, runnerapi.Operations)
}
