package webhooks

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The abandon rule. captf.io/abandon-infrastructure lets a deleting object go without a
// destroy. Set on an object that is neither deleting nor held by its state, it would lie
// dormant, and any later ordinary delete, by anyone, would skip the destroy: the guard refuses
// it (the controller voids one that got past, see controllers/decide AbandonVoid). The functions
// here are pure: they judge the old object as the API server had it before the request.

// StateHold is the reason of the old object's StateReadable=False condition when the object
// holds because of its state (the engine's state holds: StateLost, or a state that exists but
// cannot be read, StateCorrupt, StateLayoutUnknown, ...), or "" when it does not. A state lock
// held by someone else (StateLocked) is not a hold: the engine goes on once the lock is free.
func StateHold(m *Marks) string {
	c := conditionOf(m.Status.Conditions, infrav1.StateReadableCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason == "" || c.Reason == infrav1.StateLockedReason {
		return ""
	}
	return c.Reason
}

func conditionOf(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// AbandonApplies reports whether an abandon set on the object now applies at once: the old
// object is being deleted (deletionTimestamp set), or it holds because of its state. grounds
// names which, for the log.
func AbandonApplies(old *Marks) (applies bool, grounds string) {
	if old.DeletionTimestamp != nil {
		return true, "the object is being deleted"
	}
	if reason := StateHold(old); reason != "" {
		return true, fmt.Sprintf("the object holds because of its state (%s=False, %s)", infrav1.StateReadableCondition, reason)
	}
	return false, ""
}

// DormantAbandonRefusal is the denial of an abandon on an object that is neither deleting nor
// held by its state: when the abandon applies, and what to do instead.
func DormantAbandonRefusal(ref ObjectRef) string {
	return fmt.Sprintf("CAPTF guard: this request sets %s on %s, which is not being deleted and is not held by its state (%s is not False): "+
		"an abandon set now would lie dormant and let any later ordinary delete skip the destroy, so it is refused. "+
		"The abandon applies only to an object that is being deleted, or that holds because of its state (StateLost, or a state that cannot be read). "+
		"To let this object go without a destroy, delete it first and then set the annotation on the deleting object "+
		"(pause it first, annotation %s, if no destroy may start in between); to keep the infrastructure on every deletion, set spec.deletionPolicy: Retain. "+
		"See docs/deletion.md and docs/state.md",
		infrav1.AbandonInfrastructureAnnotation, ref, infrav1.StateReadableCondition, infrav1.PausedAnnotation)
}
