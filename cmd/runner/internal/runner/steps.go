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
	// StepShowJSON reads a saved plan back as JSON (captured, never printed: it holds every
	// variable's value); StepShow as text (captured for the plan record).
	StepShowJSON = "show-json"
	StepShow     = "show"
	// StepFetchPlan and StepSavePlan are the runner's own work with the state channel, not
	// terraform commands; the result does not list them.
	StepFetchPlan = "fetch-plan"
	StepSavePlan  = "save-plan"
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
	// Internal: the runner's own work (StepFetchPlan, StepSavePlan), not a command.
	Internal bool
	// SavedPlan: the command applies the saved plan (terraform may refuse it as stale).
	SavedPlan bool
}

// StepOptions are the paths and settings the commands need.
type StepOptions struct {
	VarFile     string
	LockTimeout time.Duration
	// PushFile is the state file `state push` reads (restore only); the runner writes it after
	// `state pull`.
	PushFile string
	// PlanFile is where plan, drift and refresh save their plan (`-out`), and where an apply of
	// a saved plan finds it.
	PlanFile string
	// ApplySavedPlan: the apply applies the saved plan (fetched from the channel into
	// PlanFile) instead of planning afresh.
	ApplySavedPlan bool
	// SavePlan: a plan also renders its text and saves plan, summary and text through the
	// state channel.
	SavePlan bool
}

// Steps is the one place that maps an operation to terraform/tofu commands.
func Steps(op string, o StepOptions) ([]Step, error) {
	lock := "-lock-timeout=" + runnerapi.FormatSeconds(o.LockTimeout)
	vars := "-var-file=" + o.VarFile
	// -reconfigure: use the backend as configured now and never offer to migrate a state from
	// a backend recorded in a .terraform folder that came with the module.
	init := Step{Name: StepInit, Args: []string{"init", "-input=false", "-no-color", "-reconfigure"}}
	planOut := "-out=" + o.PlanFile
	showJSON := Step{Name: StepShowJSON, Args: []string{"show", "-json", o.PlanFile}, Capture: true}
	switch op {
	case runnerapi.OperationApply:
		if o.ApplySavedPlan {
			// No -var-file: a saved plan carries its variables (terraform refuses new ones); no
			// -auto-approve: applying a saved plan never asks.
			return []Step{init, {Name: StepFetchPlan, Internal: true},
				{Name: StepApply, Args: []string{"apply", "-input=false", "-no-color", lock, o.PlanFile}, SavedPlan: true}}, nil
		}
		return []Step{init, {Name: StepApply, Args: []string{"apply", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationDestroy:
		return []Step{init, {Name: StepDestroy, Args: []string{"apply", "-destroy", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationPlan:
		steps := []Step{init, {Name: StepPlan, Args: []string{"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true}, showJSON}
		if o.SavePlan {
			steps = append(steps, Step{Name: StepShow, Args: []string{"show", "-no-color", o.PlanFile}, Capture: true}, Step{Name: StepSavePlan, Internal: true})
		}
		return steps, nil
	case runnerapi.OperationDrift:
		// A drift check is a full plan: it reports what an apply would change, which honours
		// ignore_changes and is exactly what Remediate would fix. (A refresh-only plan would
		// also flag attributes the module does not manage.)
		return []Step{init, {Name: StepPlan, Args: []string{"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true}, showJSON}, nil
	case runnerapi.OperationRefresh:
		// A refresh-only plan: it reads what changed outside terraform and writes nothing.
		return []Step{init, {Name: StepRefresh, Args: []string{"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true}, showJSON}, nil
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
