package decide

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The event types of the Kubernetes API (corev1.EventTypeNormal and EventTypeWarning; the
// decision imports no API package but meta).
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is one event a pass sends about its object.
type Event struct {
	Type, Reason, Message string
}

// Reported reports whether the condition condType already says reason (conds: the object's
// conditions as the pass found them): an event of a hold or a wait goes out once, on the
// transition, and not again while the condition says it.
func Reported(conds []metav1.Condition, condType, reason string) bool {
	c := meta.FindStatusCondition(conds, condType)
	return c != nil && c.Reason == reason
}

// WaitEvents are the Warning events of a waiting pass (ActionWaitJob, ActionWait,
// ActionIdle) or of one that deletes a Job that never started (ActionDeleteJob), each sent
// once, on the transition: when the condition that reports it did not say so already
// (conds are the object's conditions as the pass found them).
//   - A state identity hold beginning (RetainedStateFound, StateLineageChanged,
//     ReplicaStateFound; waits only):
//     the StateReadable condition does not report it yet.
//   - The running Job's pull failure (ImagePullFailed).
//   - The running Job's start block (JobCannotStart), when it counts (StartBlocked) and no pull
//     failure has its own event.
func WaitEvents(ev Evidence, d Decision, conds []metav1.Condition) []Event {
	var out []Event
	switch d.Action {
	case ActionWaitJob, ActionWait, ActionIdle:
		if e, ok := holdEvent(d, conds); ok {
			out = append(out, e)
		}
	case ActionDeleteJob:
	default:
		return nil
	}
	if d.Action != ActionWaitJob && d.Action != ActionDeleteJob || len(ev.Jobs.Running) == 0 {
		return out
	}
	run := ev.Jobs.Running[0]
	said := func(reason string) bool { return Reported(conds, RunCondition(run), reason) }
	if f := ev.Jobs.PullFailure; f != nil {
		if !said(infrav1.ImagePullFailedReason) {
			out = append(out, Event{EventWarning, infrav1.ImagePullFailedReason, PullFailureMessage(run.Name, f)})
		}
		return out
	}
	if b := StartBlocked(ev); b != nil && !said(infrav1.JobCannotStartReason) {
		out = append(out, Event{EventWarning, infrav1.JobCannotStartReason, StartBlockMessage(run.Name, b, ev.Object.Deleting)})
	}
	return out
}

// holdEvent is the Warning event of a state identity hold that begins this pass.
func holdEvent(d Decision, conds []metav1.Condition) (Event, bool) {
	w := d.Wait
	if w == nil || (w.Reason != infrav1.RetainedStateFoundReason && w.Reason != infrav1.StateLineageChangedReason && w.Reason != infrav1.ReplicaStateFoundReason) {
		return Event{}, false
	}
	if Reported(conds, infrav1.StateReadableCondition, w.Reason) {
		return Event{}, false
	}
	return Event{EventWarning, w.Reason, w.Message}, true
}

// StartEvents are the events of a Job just created for op under the name job: what the start
// means when it is not plain (a destroy plan begins, a pending plan is superseded, a destroy
// goes without a judged plan by an override), then JobStarted.
func StartEvents(ev Evidence, d Decision, op infrav1.Operation, job string) []Event {
	var out []Event
	switch pl := ev.Plan.Pending; {
	case MakesDestroyPlan(d, op):
		out = append(out, Event{EventNormal, "DestroyPlanStarted", fmt.Sprintf("the object is being deleted and asks for its destroy to be judged: "+
			"Job %s makes the destroy plan; nothing is destroyed until it passes its plan policies or an approver approves it (docs/deletion.md)", job)})
	case op == infrav1.OperationPlan && pl != nil:
		out = append(out, Event{EventNormal, "PlanSuperseded", fmt.Sprintf("plan %s no longer matches the inputs or the state (or was applied); Job %s plans again", pl.ID, job)})
	case op == infrav1.OperationDestroy && d.PlanID == "" && ev.Object.DestroyWithoutPlan:
		out = append(out, Event{EventWarning, "DestroyWithoutPlan", fmt.Sprintf("Job %s destroys without a judged destroy plan: an override group member set %s (docs/deletion.md)",
			job, infrav1.DestroyWithoutPlanAnnotation)})
	}
	started := fmt.Sprintf("started Job %s (%s)", job, op)
	if t := TargetOf(ev, d, op); t != "" {
		started += fmt.Sprintf(", carrying out %s=%q", infrav1.TargetOperationAnnotation, t)
	}
	return append(out, Event{EventNormal, "JobStarted", started})
}
