package runner

import (
	"slices"
	"time"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
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
	// RefreshOnly (Plan or Drift): the plan is a refresh-only plan (`plan -refresh-only`): a
	// Plan's is applied later by a Refresh Job; a Drift check's compares the infrastructure
	// with the state (drift mode Accept).
	RefreshOnly bool
	// DestroyPlan (Plan): the plan is a destroy plan (`plan -destroy`), which a Destroy Job
	// applies later (ApplySavedPlan).
	DestroyPlan bool
	// Target (Apply or Plan) is the run's targeted operation: a replace adds its PlanArgs
	// (`-replace=ADDR`) to an Apply's apply and to a Plan's plan; an import adds nothing (its
	// import block is a file of the module copy). An apply of a saved plan takes none (the plan
	// file carries it), nor does a refresh-only or a destroy plan.
	Target runnerapi.Target
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
	// applySaved applies the saved plan fetched from the channel into PlanFile. No -var-file: a
	// saved plan carries its variables (terraform refuses new ones); no -auto-approve: applying
	// a saved plan never asks.
	applySaved := []Step{init, {Name: StepFetchPlan, Internal: true},
		{Name: StepApply, Args: []string{"apply", "-input=false", "-no-color", lock, o.PlanFile}, SavedPlan: true}}
	switch op {
	case runnerapi.OperationApply:
		if o.ApplySavedPlan {
			return applySaved, nil
		}
		apply := append(append([]string{"apply", "-auto-approve", "-input=false", "-no-color", lock}, o.Target.PlanArgs()...), vars)
		return []Step{init, {Name: StepApply, Args: apply}}, nil
	case runnerapi.OperationDestroy:
		if o.ApplySavedPlan {
			// The destroy plan a Plan Job saved and the object's policies or an approver let
			// by: applying it destroys exactly what the plan shows, nothing else.
			saved := slices.Clone(applySaved)
			saved[len(saved)-1].Name = StepDestroy
			return saved, nil
		}
		return []Step{init, {Name: StepDestroy, Args: []string{"apply", "-destroy", "-auto-approve", "-input=false", "-no-color", lock, vars}}}, nil
	case runnerapi.OperationPlan:
		plan := Step{Name: StepPlan, DetailedExitCode: true}
		switch {
		case o.RefreshOnly:
			plan.Args = []string{"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}
		case o.DestroyPlan:
			plan.Args = []string{"plan", "-destroy", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}
		default:
			plan.Args = append(append([]string{"plan", "-detailed-exitcode", "-input=false", "-no-color", lock}, o.Target.PlanArgs()...), vars, planOut)
		}
		steps := []Step{init, plan, showJSON}
		if o.SavePlan {
			steps = append(steps, Step{Name: StepShow, Args: []string{"show", "-no-color", o.PlanFile}, Capture: true}, Step{Name: StepSavePlan, Internal: true})
		}
		return steps, nil
	case runnerapi.OperationDrift:
		// A drift check is a full plan: it reports what an apply would change, which honours
		// ignore_changes and is exactly what Remediate would fix. (A refresh-only plan would
		// also flag attributes the module does not manage.)
		if o.RefreshOnly {
			// Drift mode Accept asks another question: what changed outside terraform,
			// compared with the state (a refresh-only plan), which a Refresh then records.
			return []Step{init, {Name: StepPlan, Args: []string{"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true}, showJSON}, nil
		}
		return []Step{init, {Name: StepPlan, Args: []string{"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true}, showJSON}, nil
	case runnerapi.OperationRefresh:
		if o.ApplySavedPlan {
			// The refresh-only plan a Plan Job saved (and someone approved), applied as an
			// Apply applies a saved plan.
			return applySaved, nil
		}
		// A refresh-only plan, then its apply: the state records what changed outside
		// terraform, and no infrastructure changes. The apply applies the plan file this run
		// just made (not a fetched plan); it runs also when the plan found no changes, which
		// then writes no new state.
		return []Step{init,
			{Name: StepRefresh, Args: []string{"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, planOut}, DetailedExitCode: true},
			showJSON,
			{Name: StepApply, Args: []string{"apply", "-input=false", "-no-color", lock, o.PlanFile}}}, nil
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
