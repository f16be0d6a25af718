package decide

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Backoff after a failed Job: 1 minute, doubling, at most 10 minutes.
const (
	BackoffBase = time.Minute
	BackoffMax  = 10 * time.Minute
)

// Bookkept is what counting a finished Job concluded; the status setters report it.
type Bookkept struct {
	Job string
	Op  infrav1.Operation
	// RefreshOnly: the Job ran a refresh-only plan (reported on DriftJobSucceeded).
	RefreshOnly bool
	Outcome     infrav1.RunOutcome
	Message     string
	// Failures is the consecutive failure count after this Job (0 after a success), and
	// backoff the wait before a retry; counts is false for outcomes that never count toward
	// the backoff (a success, a fenced run).
	Failures int
	Backoff  time.Duration
	Counts   bool
	At       time.Time
	// DriftChecked: a drift check's result was read; DriftFound: it found drift; actOnDrift:
	// the object's mode acts on it (Remediate: an apply follows; Accept: a refresh follows).
	DriftChecked bool
	DriftFound   bool
	ActOnDrift   bool
	// RefreshRequest is the captf.io/refresh value the Job answered (recorded on the Job).
	RefreshRequest string
	// TargetRequest is the captf.io/target-operation value the Job carried out (recorded on
	// the Job).
	TargetRequest string
	// DriftCheckRequest is the captf.io/drift-check value the Job answered (recorded on a
	// Drift Job started while a check was asked for).
	DriftCheckRequest string
	// DriftSummary says what changed (counts and addresses), when the runner reported it.
	DriftSummary string
	// HealthSampled: the Job's apply or drift check gave a health sample (a kind with a health
	// signal, a successful Job); Health is the sample (nil: the module exports no health
	// output).
	HealthSampled bool
	Health        *runnerapi.HealthSample
	// Plan is the plan a successful plan Job stored; appliedPlan the plan ID an apply Job ran.
	Plan        *infrav1.PlanRecord
	AppliedPlan string
	// BackupDue: the Job may have moved the state, and its backup waits for a pass that is not
	// paused (BacksUpNow): Markers records the Job's name in captf.io/backup-due.
	BackupDue bool
}

// OutputsResult is the outcome of reading the module's outputs (nil err: valid); reason is the
// outputs problem's reason (state.OutputError) when the error says one.
type OutputsResult struct {
	Err    error
	Reason string
}

// RunEnd is how a finished Job's run ended, the part of jobs.Outcome bookkeeping judges.
type RunEnd struct {
	Outcome infrav1.RunOutcome
	// Message summarises the run (already redacted by the runner).
	Message string
	// PlanStale: terraform refused the saved plan because the state changed since it was made.
	PlanStale bool
	// PlanRefused: the channel or the runner refused the saved plan before terraform ran.
	PlanRefused string
}

// JudgeFinished is the pure part of bookkeeping: what a finished Job means for the object's
// durable markers, given the failures counted so far.
func JudgeFinished(cur JobView, out RunEnd, failuresBefore int, now time.Time) Bookkept {
	b := Bookkept{Job: cur.Name, Op: cur.Operation, RefreshOnly: cur.RefreshOnly, TargetRequest: cur.Target, Outcome: out.Outcome, Message: out.Message, At: now}
	switch {
	case out.Outcome == infrav1.RunSucceeded:
	case out.PlanStale || out.PlanRefused != "":
		// The saved plan no longer fits the state (or was refused before terraform ran):
		// nothing was applied, and a new plan follows. Not a failure of the module.
		b.Failures = failuresBefore
	case out.Outcome == infrav1.RunFenced, out.Outcome == infrav1.RunInterrupted:
		// Fenced: another run owns the state now, this one wrote nothing. Interrupted: a
		// deletion, an eviction or the deadline stopped it. Neither is a failure of the
		// module, and neither counts toward the backoff.
		b.Failures = failuresBefore
	case cur.Operation == infrav1.OperationRestore, cur.Operation.Background():
		// A failed restore is recorded against its serial (never retried); a failed drift
		// check waits for the next one. Neither delays applies and destroys.
		b.Failures = failuresBefore
	default:
		b.Counts = true
		b.Failures = failuresBefore + 1
		b.Backoff = backoff(b.Failures)
	}
	return b
}

// JudgeCheck adds what a successful drift check's result says (result: the runner's result
// document, nil when the pod reported none): whether drift was found and whether the object's
// drift mode acts on it (ActsOnDrift), with the run's message as the finding's summary, and,
// for a kind that reports health (sampled), the health sample its plan evaluated. A failed
// check, or one without a result, says nothing of either.
func (b *Bookkept) JudgeCheck(cur JobView, result *runnerapi.Result, mode infrav1.DriftMode, sampled bool) {
	if b.Outcome != infrav1.RunSucceeded || result == nil {
		return
	}
	if cur.Operation.Background() && result.Drift != nil {
		b.DriftChecked, b.DriftFound = true, *result.Drift
		b.ActOnDrift = ActsOnDrift(mode)
		b.DriftSummary = b.Message
	}
	if sampled && cur.Operation == infrav1.OperationDrift {
		b.HealthSampled, b.Health = true, result.Health
	}
}

// Markers writes a bookkept Job's durable markers onto the object: the next run sequence, and
// the applied hash, destroyed flag, restore outcome or failure backoff.
func (b Bookkept) Markers(o metav1.Object, cur JobView, restoreSerial string) {
	SetAnnotation(o, infrav1.RunSeqAnnotation, strconv.FormatInt(cur.Seq+1, 10))
	if b.BackupDue {
		SetAnnotation(o, infrav1.BackupDueAnnotation, cur.Name)
	}
	if cur.Operation.Background() {
		SetAnnotation(o, infrav1.LastDriftCheckAnnotation, b.At.UTC().Format(time.RFC3339))
		if b.DriftFound && b.ActOnDrift {
			SetAnnotation(o, infrav1.RemediateAnnotation, cur.Name)
		}
		// A check asked for is answered whatever the outcome: a failed check never counts
		// toward the backoff, so a request kept after one would start it again at once.
		b.answerDriftCheck(o)
	}
	if rec := b.driftRecord(infrav1.ParseDriftRecord(o.GetAnnotations()[infrav1.DriftFindingAnnotation]), cur); rec != nil {
		SetAnnotation(o, infrav1.DriftFindingAnnotation, rec.Annotation())
	}
	if b.HealthSampled && b.Outcome == infrav1.RunSucceeded {
		prev := infrav1.ParseHealthRecord(o.GetAnnotations()[infrav1.HealthRecordAnnotation])
		SetAnnotation(o, infrav1.HealthRecordAnnotation, NextHealthRecord(prev, b.Health, cur.Name, b.At).Annotation())
	}
	b.answerRequests(o, cur)
	b.planMarkers(o)
	if b.AppliedPlan != "" && b.Outcome != infrav1.RunFenced {
		// At most once (I9): whatever happened, this plan is spent.
		SetAnnotation(o, infrav1.AppliedPlanAnnotation, b.AppliedPlan)
		RemoveAnnotation(o, infrav1.PendingPlanAnnotation)
		RemoveAnnotation(o, infrav1.ApprovePlanAnnotation)
	}
	if cur.Operation == infrav1.OperationRestore {
		if b.Outcome == infrav1.RunSucceeded {
			RemoveAnnotation(o, infrav1.RestoreStateAnnotation)
			RemoveAnnotation(o, infrav1.RestoreFailedAnnotation)
		} else if b.Outcome != infrav1.RunFenced && restoreSerial != "" {
			SetAnnotation(o, infrav1.RestoreFailedAnnotation, restoreSerial)
		}
	}
	switch {
	case b.Outcome == infrav1.RunSucceeded:
		RemoveAnnotation(o, infrav1.FailuresAnnotation)
		RemoveAnnotation(o, infrav1.RetryAtAnnotation)
		RemoveAnnotation(o, infrav1.LastErrorAnnotation)
		switch cur.Operation {
		case infrav1.OperationApply:
			SetAnnotation(o, infrav1.AppliedHashAnnotation, cur.InputsHash)
		case infrav1.OperationDestroy:
			SetAnnotation(o, infrav1.DestroyedAnnotation, "true")
		}
	case b.Counts:
		SetAnnotation(o, infrav1.FailuresAnnotation, strconv.Itoa(b.Failures))
		SetAnnotation(o, infrav1.LastErrorAnnotation, truncate(b.summary(), 1024))
		SetAnnotation(o, infrav1.RetryAtAnnotation, b.At.Add(b.Backoff).UTC().Format(time.RFC3339))
	}
}

// answerRequests removes what a person or a drift check asked for and the Job answered: the
// drift to remediate or accept, a refresh, a targeted operation.
func (b Bookkept) answerRequests(o metav1.Object, cur JobView) {
	if (cur.Operation == infrav1.OperationApply || cur.Operation == infrav1.OperationRefresh) && b.Outcome == infrav1.RunSucceeded {
		// An apply remediated the drift found, a refresh accepted it.
		RemoveAnnotation(o, infrav1.RemediateAnnotation)
	}
	if cur.Operation == infrav1.OperationRefresh && b.Outcome == infrav1.RunSucceeded {
		b.answerRefresh(o)
	}
	if cur.Operation == infrav1.OperationApply && (b.Outcome == infrav1.RunSucceeded || b.Counts) || cur.Operation == infrav1.OperationPlan && b.Counts {
		// A targeted operation is answered once the apply that carried it ran, whatever came of
		// it (status.lastRun says), or once a plan of it failed (an import ID that does not
		// exist fails the plan): a request kept after a failure would ride, and fail, every
		// later apply and plan. A fenced, interrupted or refused run did nothing: the request
		// stays.
		b.answerTarget(o)
	}
}

// planMarkers records the plan a successful Plan Job saved: it waits (pending-plan) when it
// changes something, and a destroy plan always waits (only its Destroy Job lets the deletion
// finish; decideDestroyPlan applies one that changes nothing without an approver); a
// refresh-only plan that found nothing answers the refresh; any other plan that changes nothing
// means the inputs are in effect already.
func (b Bookkept) planMarkers(o metav1.Object) {
	pl := b.Plan
	switch {
	case pl == nil:
	case pl.Changes() || pl.Destroy:
		SetAnnotation(o, infrav1.PendingPlanAnnotation, pl.Annotation())
	case pl.RefreshOnly:
		RemoveAnnotation(o, infrav1.PendingPlanAnnotation)
		RemoveAnnotation(o, infrav1.RemediateAnnotation)
		b.answerRefresh(o)
	default:
		SetAnnotation(o, infrav1.AppliedHashAnnotation, pl.InputsHash)
		RemoveAnnotation(o, infrav1.PendingPlanAnnotation)
		RemoveAnnotation(o, infrav1.RemediateAnnotation)
		// A targeted operation whose plan changes nothing (an address the state does not
		// hold) has nothing left to do.
		b.answerTarget(o)
	}
}

// answerRefresh removes the refresh request the Job answered; a request whose value changed
// since the Job was created is a new one, and stays.
func (b Bookkept) answerRefresh(o metav1.Object) {
	if v, ok := o.GetAnnotations()[infrav1.RefreshAnnotation]; ok && v == b.RefreshRequest {
		RemoveAnnotation(o, infrav1.RefreshAnnotation)
	}
}

// answerDriftCheck removes the drift check request the Job answered; a request whose value
// changed since the Job was created is a new one, and stays.
func (b Bookkept) answerDriftCheck(o metav1.Object) {
	if v, ok := o.GetAnnotations()[infrav1.DriftCheckAnnotation]; ok && b.DriftCheckRequest != "" && v == b.DriftCheckRequest {
		RemoveAnnotation(o, infrav1.DriftCheckAnnotation)
	}
}

// Event is the note of the Warning event of a Job that did not succeed.
func (b Bookkept) Event() string {
	return fmt.Sprintf("Job %s (%s) %s: %s", b.Job, b.Op, lower(string(b.Outcome)), b.Message)
}

// summary is the one-line account of a Job that did not succeed.
func (b Bookkept) summary() string {
	return fmt.Sprintf("Job %s %s: %s", b.Job, lower(string(b.Outcome)), b.Message)
}

func backoff(failures int) time.Duration {
	d := BackoffBase
	for i := 1; i < failures && d < BackoffMax; i++ {
		d *= 2
	}
	if d > BackoffMax {
		d = BackoffMax
	}
	return d
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func lower(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}

// driftRecord is the drift record a counted Job leaves in place of prev: a check's finding, or,
// after drift was found, the apply that remediated it or the refresh that accepted it. nil:
// the record stays as it is.
func (b Bookkept) driftRecord(prev *infrav1.DriftRecord, cur JobView) *infrav1.DriftRecord {
	if b.Outcome != infrav1.RunSucceeded {
		return nil
	}
	switch {
	case cur.Operation.Background() && b.DriftChecked:
		if b.DriftFound {
			return &infrav1.DriftRecord{Reason: infrav1.DriftFoundReason, Job: cur.Name, Summary: b.DriftSummary}
		}
		return &infrav1.DriftRecord{Reason: infrav1.NoDriftReason, Job: cur.Name}
	case cur.Operation == infrav1.OperationApply && prev.Found():
		return &infrav1.DriftRecord{Reason: infrav1.RemediatedReason, Job: cur.Name}
	case cur.Operation == infrav1.OperationRefresh && prev.Found():
		return &infrav1.DriftRecord{Reason: infrav1.AcceptedReason, Job: cur.Name}
	}
	return nil
}
