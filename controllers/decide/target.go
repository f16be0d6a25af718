package decide

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// TargetEvidence is the targeted operation a person asked for (annotation
// captf.io/target-operation): Request is its value as written ("" for none), Target the
// operation runnerapi.ParseTarget read from it and Canonical its canonical form, and Problem
// why it could not be read ("" when it could).
type TargetEvidence struct {
	Request   string
	Target    runnerapi.Target
	Canonical string
	Problem   string
}

// targetEvidence reads the request from the object's annotations.
func targetEvidence(ann map[string]string) TargetEvidence {
	req, ok := ann[infrav1.TargetOperationAnnotation]
	if !ok {
		return TargetEvidence{}
	}
	t, err := runnerapi.ParseTarget(req)
	if err != nil {
		return TargetEvidence{Request: req, Problem: err.Error()}
	}
	return TargetEvidence{Request: req, Target: t, Canonical: t.String()}
}

// TargetCarried reports a targeted operation the next apply carries out: a readable request on
// an object that applied before (before its first apply there is no state to target; the
// request waits for it).
func TargetCarried(ev Evidence) bool {
	return ev.Target.Request != "" && ev.Target.Problem == "" && ev.State.AppliedBefore
}

// TargetWanted reports a request that wants an apply of its own, or a wait that says why it
// cannot be read: an object that applied before and carries one.
func TargetWanted(ev Evidence) bool {
	return ev.Target.Request != "" && ev.State.AppliedBefore
}

// CurrentTarget is the canonical form of the targeted operation the next apply carries out
// ("" for none): what a saved plan of that apply must have been made with.
func CurrentTarget(ev Evidence) string {
	if !TargetCarried(ev) {
		return ""
	}
	return ev.Target.Canonical
}

// TargetOf is the request (as written) a Job of op carries out: an apply that plans afresh, or
// an apply's plan, started while a request is carried; the apply of a saved plan carries the
// request its plan was made with (decidePlan applies only a plan of the current request). Every
// other Job carries none.
func TargetOf(ev Evidence, d Decision, op infrav1.Operation) string {
	if !TargetCarried(ev) {
		return ""
	}
	switch {
	case op == infrav1.OperationApply && d.PlanID == "":
		return ev.Target.Request
	case op == infrav1.OperationApply:
		if p := ev.Plan.Pending; p != nil && p.ID == d.PlanID && p.Target == CurrentTarget(ev) {
			return ev.Target.Request
		}
	case op == infrav1.OperationPlan && !d.RefreshOnly && !d.DestroyPlan:
		return ev.Target.Request
	}
	return ""
}

// decideTarget decides a targeted operation the inputs do not already start an apply for: an
// apply of its own (through a saved plan when the object's plans are judged), or a wait.
func decideTarget(ev Evidence, d Decision) Decision {
	switch w := stateWriterWait(ev, "targeted operation"); {
	case ev.Target.Problem != "":
		d.Action = ActionWait
		d.Wait = &Wait{ConditionType: infrav1.ApplyJobSucceededCondition, Reason: infrav1.TargetOperationInvalidReason,
			Message: fmt.Sprintf("%s=%q cannot be read: %s; correct or remove the annotation (docs/state.md, \"Targeted operations\")",
				infrav1.TargetOperationAnnotation, ev.Target.Request, ev.Target.Problem)}
	case w != nil:
		d.Action, d.Wait = ActionWait, w
	case NeedsPlan(ev):
		return decidePlan(ev, d)
	default:
		d.Action, d.Operation = ActionStart, infrav1.OperationApply
	}
	return d
}

// answerTarget removes the targeted operation the Job carried out; a request whose value
// changed since the Job was created is a new one, and stays.
func (b Bookkept) answerTarget(o metav1.Object) {
	if v, ok := o.GetAnnotations()[infrav1.TargetOperationAnnotation]; ok && b.TargetRequest != "" && v == b.TargetRequest {
		RemoveAnnotation(o, infrav1.TargetOperationAnnotation)
	}
}

// Reasons of the events that answer a targeted operation.
const (
	TargetOperationDoneReason   = "TargetOperationDone"
	TargetOperationFailedReason = "TargetOperationFailed"
)

// TargetEvents are the events of a counted Job that answered a targeted operation: the apply
// that carried it out (succeeded, or failed: the request is answered either way), a plan of it
// that failed, or one that changed nothing.
func TargetEvents(b Bookkept, cur JobView) []Event {
	if b.TargetRequest == "" {
		return nil
	}
	switch {
	case cur.Operation == infrav1.OperationApply && b.Outcome == infrav1.RunSucceeded:
		return []Event{{EventNormal, TargetOperationDoneReason, fmt.Sprintf("Job %s carried out %s=%q", b.Job, infrav1.TargetOperationAnnotation, b.TargetRequest)}}
	case (cur.Operation == infrav1.OperationApply || cur.Operation == infrav1.OperationPlan) && b.Counts:
		return []Event{{EventWarning, TargetOperationFailedReason, fmt.Sprintf(
			"Job %s did not carry out %s=%q: %s; the request is answered and not retried, ask again once the cause is fixed",
			b.Job, infrav1.TargetOperationAnnotation, b.TargetRequest, b.Message)}}
	case cur.Operation == infrav1.OperationPlan && b.Plan != nil && !b.Plan.Changes() && b.Outcome == infrav1.RunSucceeded:
		return []Event{{EventNormal, TargetOperationDoneReason, fmt.Sprintf(
			"the plan of %s=%q (Job %s) changes nothing (is the address in the state?): the request is answered", infrav1.TargetOperationAnnotation, b.TargetRequest, b.Job)}}
	}
	return nil
}
