package decide

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The state's identity (docs/state.md, "Whose state it is"). A Terraform state is known by its
// lineage. The object records the lineage of the state it wrote (its first Job that moved the
// state) in the annotation captf.io/object-state-lineage, which, unlike status, survives
// clusterctl move. Two holds follow from it, both decided in Decide (stateHold):
//   - RetainedState: a state the object never wrote (kept by a Retain deletion or an abandon,
//     or left by another object of the same name) is run against only once an override group
//     member names its lineage in captf.io/adopt-state; the first Job is then pinned to it;
//   - LineageChanged: a state whose lineage is no longer the object's own (replaced outside a
//     restore, for example by a module that wrote another state) holds the object until a
//     restore of a backup of the object's own lineage.
// The recorded lineage is written once and never changed by the controller: a restore brings
// that lineage back (decideRestore refuses a backup of another lineage).

// RecordLineage writes what a Job's state says of the object's identity onto o. The first
// lineage the object's Jobs leave is its own (an adopt opt-in has then done its work and
// goes); the controller never changes it afterwards, so a state replaced by another lineage is
// held, not taken for the object's own. A lineage other than the own one is noted
// (StateLineageSeenAnnotation) so the next passes read the state and hold; the note goes once
// a Job leaves the own lineage again (a restore).
func RecordLineage(o metav1.Object, own, after string) {
	if after == "" {
		return
	}
	if own == "" {
		SetAnnotation(o, infrav1.StateLineageAnnotation, after)
		RemoveAnnotation(o, infrav1.AdoptStateAnnotation)
		own = after
	} else if o.GetAnnotations()[infrav1.StateLineageAnnotation] == "" {
		// Known from the newest backup (an object that wrote states before the annotation).
		SetAnnotation(o, infrav1.StateLineageAnnotation, own)
	}
	if after != own {
		SetAnnotation(o, infrav1.StateLineageSeenAnnotation, after)
	} else {
		RemoveAnnotation(o, infrav1.StateLineageSeenAnnotation)
	}
}

// ExpectedLineage is the state lineage a Job of op may run against: the lineage of the state
// this pass read live, so the Job's state channel refuses a state Secret that was deleted,
// emptied or replaced between that read and the Job's first request (I7 at the point of use).
// Empty, and so unchecked, when the pass read no state (a first apply) and for a restore,
// which replaces the state.
func ExpectedLineage(ev Evidence, op infrav1.Operation) string {
	if ev.State.Read != StatePresent || op == infrav1.OperationRestore {
		return ""
	}
	return ev.State.Lineage
}
