package jobs

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Reasons an Outcome gives besides the Job's own condition reasons.
const (
	// ReasonRunning: the Job has no condition that decides how it ends (jobstatus.Decided).
	ReasonRunning = "Running"
	// ReasonDeleted: the Job is being deleted before it finished.
	ReasonDeleted = "Deleted"
	// ReasonCompleted: the Job completed.
	ReasonCompleted = "Completed"
)

// maxMessage bounds Outcome.Message (status.lastRun.message allows 4096 bytes).
const maxMessage = 1024

// Outcome is what a Job says about its run.
type Outcome struct {
	// Decided: the Job controller has said how the Job ends (jobstatus.Decided: Complete or
	// Failed, or the interim SuccessCriteriaMet or FailureTarget). A decided Job's pod may still
	// be stopping, and an interim condition is not yet a finished Job (jobstatus.Finished): the
	// caller judges whether the run is over with jobstatus, on pods read live, before it acts.
	Decided bool
	// Outcome is how the run ended; empty while the Job runs. A Job being deleted before it
	// finished is Interrupted and not Decided.
	Outcome infrav1.RunOutcome
	// Reason is the deciding condition's reason (DeadlineExceeded, BackoffLimitExceeded,
	// Completed, ...), ReasonDeleted or ReasonRunning.
	Reason string
	// Message summarises the run for status.lastRun.message (already redacted by the runner).
	Message string
	// Result is the runner's result, when the main container left one.
	Result *Result
	// ExitCode is the main container's exit code, when it terminated.
	ExitCode *int32
	// LockBroken: the run's state channel broke a stale state lock (I8); the controller emits
	// one StateLockBroken event for it. From the result.
	LockBroken *LockBroken
	// LockHolder: the run could not take the state lock because this holder has it (a run
	// that did not succeed); the controller reports StateLocked naming it. From the result.
	LockHolder *LockHolder
	// Summary (plan, drift, refresh): the counts (create, update, replace, delete) and at most
	// runnerapi.MaxResultAddresses changed resources. From the result.
	Summary *PlanSummary
	// SavedPlan (plan): the plan the run stored in the plan Secret (naming.PlanSecretName),
	// whose record there lists up to runnerapi.MaxRecordAddresses addresses. From the result.
	SavedPlan *PlanRef
	// AppliedPlan (an apply of a saved plan): the plan terraform applied (all of it when the
	// outcome is Succeeded). From the result.
	AppliedPlan *PlanRef
	// PlanStale (an apply of a saved plan): terraform refused the plan because the state changed
	// since it was made; nothing was applied. Plan again; never apply afresh. From the result.
	PlanStale bool
	// PlanRefused (an apply or a refresh of a saved plan): the channel or the runner refused the
	// plan before terraform ran (runnerapi.PlanRefusedSuperseded, PlanRefusedConsumed,
	// PlanRefusedCorrupt, PlanRefusedKind);
	// nothing was applied. From the result.
	PlanRefused string
	// UndeclaredVariables: variables the run passed (spec.variables, spec.variablesFrom) that
	// the module does not declare, which terraform ignored; UndeclaredTruncated: the module
	// leaves more undeclared than the runner listed. Not a failure: the controller emits one
	// UndeclaredVariables Warning event. From the result.
	UndeclaredVariables []string
	UndeclaredTruncated bool
}

// Byte budgets of a list of undeclared variables (VariableList).
const (
	// MessageVariablesBytes bounds the list in Outcome.Message, which keeps room for the error.
	MessageVariablesBytes = 300
	// EventVariablesBytes bounds the list in the UndeclaredVariables event's note (the API
	// server refuses notes over 1 KiB).
	EventVariablesBytes = 600
)

// VariableList joins names with ", " in at most about budget bytes; "and more" ends the list
// when names did not all fit or more is set (the runner listed only some).
func VariableList(names []string, more bool, budget int) string {
	if len(names) == 0 && more {
		return "(the runner's result had no room to name them)"
	}
	var b strings.Builder
	for i, n := range names {
		if i > 0 && b.Len()+2+len(n) > budget {
			more = true
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
	}
	if more {
		b.WriteString(", and more")
	}
	return b.String()
}

// OutcomeOf reads a Job and, when given, its pods: the condition that decided the Job
// (jobstatus.Decided) says whether and how it ends; the runner's result in the main container's termination message refines a
// failure into Failed or Interrupted and supplies the message.
func OutcomeOf(job *batchv1.Job, pods []corev1.Pod) Outcome {
	var out Outcome
	term := mainTerminated(job, pods)
	if term != nil {
		out.ExitCode = &term.ExitCode
		if r, err := runnerapi.ParseResult([]byte(term.Message)); err == nil {
			out.Result = &r
			out.LockBroken, out.LockHolder = r.LockBroken, r.LockHolder
			out.Summary, out.SavedPlan, out.AppliedPlan = r.Summary, r.SavedPlan, r.AppliedPlan
			out.PlanStale, out.PlanRefused = r.PlanStale, r.PlanRefused
			out.UndeclaredVariables, out.UndeclaredTruncated = r.UndeclaredVariables, r.UndeclaredTruncated
		}
	}
	cond, success := jobstatus.Decided(job)
	switch {
	case cond == nil && job.DeletionTimestamp != nil:
		out.Outcome, out.Reason = infrav1.RunInterrupted, ReasonDeleted
	case cond == nil:
		out.Reason = ReasonRunning
	case success:
		out.Decided, out.Outcome, out.Reason = true, infrav1.RunSucceeded, ReasonCompleted
	default:
		out.Decided, out.Reason = true, cond.Reason
		out.Outcome = failureOutcome(cond, out.Result, term, pods)
	}
	out.Message = message(out, cond)
	return out
}

// failureOutcome tells an interrupted run from a failed one.
func failureOutcome(cond *batchv1.JobCondition, r *Result, term *corev1.ContainerStateTerminated, pods []corev1.Pod) infrav1.RunOutcome {
	// The deadline stopped the run (the runner saw SIGTERM, or was killed).
	if cond.Reason == batchv1.JobReasonDeadlineExceeded {
		return infrav1.RunInterrupted
	}
	if r != nil {
		return infrav1.RunOutcome(r.Outcome)
	}
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			// Eviction, preemption, node drain, API-initiated deletion.
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				return infrav1.RunInterrupted
			}
		}
	}
	if term != nil {
		switch {
		case term.Reason == "OOMKilled":
			return infrav1.RunFailed
		case term.ExitCode == runnerapi.ExitInterrupted, term.ExitCode == 128+9, term.ExitCode == 128+15:
			return infrav1.RunInterrupted
		case term.ExitCode == runnerapi.ExitFenced:
			return infrav1.RunFenced
		}
	}
	return infrav1.RunFailed
}

// message says what the run reports (its one-line facts, resultFacts: changes, counts, a
// stale or refused plan, a lock held or broken, the variables the module does not declare),
// then the module's own error (often several lines: a table of kubectl shows the first), and
// last the Job controller's word on how the Job ended (its backoff limit or deadline), which
// says nothing of why and so leads only when the runner left no result.
func message(o Outcome, cond *batchv1.JobCondition) string {
	var parts []string
	if r := o.Result; r != nil {
		parts = resultFacts(r)
	} else if o.Decided && o.Outcome != infrav1.RunSucceeded {
		if o.ExitCode != nil {
			parts = append(parts, fmt.Sprintf("runner exited with code %d (%s) and left no result", *o.ExitCode, ExitCodeMeaning(*o.ExitCode)))
		} else {
			parts = append(parts, "runner left no result")
		}
	}
	var errText, jobWord string
	if r := o.Result; r != nil {
		errText = r.Error
	}
	if cond != nil && cond.Type != batchv1.JobComplete && cond.Type != batchv1.JobSuccessCriteriaMet && cond.Message != "" {
		if errText != "" {
			jobWord = "Job: " + cond.Message
		} else {
			parts = append([]string{cond.Message}, parts...)
		}
	}
	if o.Reason == ReasonDeleted {
		parts = append([]string{"the Job was deleted before it finished"}, parts...)
	}
	facts := strings.Join(parts, "; ")
	if errText == "" {
		return tail(facts, maxMessage)
	}
	// The run's facts (one line), then the error, cut at its start when the whole is too long
	// (terraform ends its output with the error's last words), then the Job controller's word.
	errText = tail(errText, max(maxMessage-len(facts)-len(jobWord)-4, 16))
	var out []string
	for _, s := range []string{facts, errText, jobWord} {
		if s != "" {
			out = append(out, s)
		}
	}
	return tail(strings.Join(out, "; "), maxMessage)
}

// resultFacts are the one-line facts of a runner's result, in the order message gives them.
func resultFacts(r *Result) []string {
	var parts []string
	if r.Changes != nil {
		parts = append(parts, fmt.Sprintf("changes: %t", *r.Changes))
	}
	if r.Drift != nil {
		parts = append(parts, fmt.Sprintf("drift: %t", *r.Drift))
	}
	if sum := r.Summary; sum != nil {
		parts = append(parts, fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete", sum.Create, sum.Update, sum.Replace, sum.Delete))
	}
	if sp := r.SavedPlan; sp != nil {
		parts = append(parts, "saved plan "+sp.ID)
	}
	if ap := r.AppliedPlan; ap != nil {
		parts = append(parts, "applied plan "+ap.ID)
	}
	if r.PlanStale {
		parts = append(parts, "the saved plan is stale (the state changed since it was made); nothing was applied")
	}
	if r.PlanRefused != "" {
		parts = append(parts, "the saved plan was refused ("+r.PlanRefused+"); nothing was applied")
	}
	if b := r.LockBroken; b != nil {
		parts = append(parts, fmt.Sprintf("broke the stale state lock %s of pod %s (Job %s)", b.LockID, b.Pod, b.Job))
	}
	if h := r.LockHolder; h != nil {
		parts = append(parts, "the state is locked by "+describeHolder(*h))
	}
	if len(r.UndeclaredVariables) > 0 || r.UndeclaredTruncated {
		parts = append(parts, "variables the module does not declare (ignored): "+VariableList(r.UndeclaredVariables, r.UndeclaredTruncated, MessageVariablesBytes))
	}
	return parts
}

// tail returns s when it fits in n bytes, else "..." and the last bytes of s that fit, cut on a
// character boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n + 3
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return "..." + s[start:]
}

// describeHolder names a lock holder for a message: who, the lock ID, the operation and since
// when, as far as its lock info says.
func describeHolder(h LockHolder) string {
	who := h.Who
	if who == "" {
		who = "an unknown holder"
	}
	s := fmt.Sprintf("%s (lock %s", who, h.ID)
	if h.Operation != "" {
		s += ", " + h.Operation
	}
	if h.Created != "" {
		s += ", since " + h.Created
	}
	return s + ")"
}

// ExitCodeMeaning names a runner exit code (docs/runner.md).
func ExitCodeMeaning(code int32) string {
	switch code {
	case runnerapi.ExitOK:
		return "succeeded"
	case runnerapi.ExitTerraformFailed:
		return "terraform failed"
	case runnerapi.ExitBadInput:
		return "bad input"
	case runnerapi.ExitBinaryMissing:
		return "no terraform or tofu binary"
	case runnerapi.ExitInterrupted:
		return "interrupted"
	case runnerapi.ExitInternal:
		return "runner error"
	case runnerapi.ExitFenced:
		return "fenced: the run lease names another Job"
	case runnerapi.ExitPlanRefused:
		return "the saved plan was refused (stale, superseded, consumed or corrupt); nothing was applied"
	case 128 + 9:
		return "killed"
	case 128 + 15:
		return "terminated"
	}
	return "unknown"
}

// mainTerminated returns the terminated state of the Job's main container, from the newest pod
// that has one (the Job has at most one pod with backoffLimit 0; the newest wins regardless).
func mainTerminated(job *batchv1.Job, pods []corev1.Pod) *corev1.ContainerStateTerminated {
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if jobstatus.PodOfJob(&pods[i], job) {
			sorted = append(sorted, &pods[i])
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		return sorted[j].CreationTimestamp.Before(&sorted[i].CreationTimestamp)
	})
	for _, p := range sorted {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != MainContainer {
				continue
			}
			if cs.State.Terminated != nil {
				return cs.State.Terminated
			}
			if cs.LastTerminationState.Terminated != nil {
				return cs.LastTerminationState.Terminated
			}
		}
	}
	return nil
}
