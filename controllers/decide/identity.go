package decide

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
//
// The lineage is recorded when a Job that wrote the state is counted. A first Job whose result
// is never counted (deleted with --cascade=orphan, its pod running on) would leave a state the
// object seems never to have written, and RetainedState would hold the object's own state. So
// the start of the first mutating Job against no state is marked (NoteFirstRun,
// captf.io/state-first-run with the object's UID), and the state found after it is not held as
// retained (RetainedState): the next Job runs on it, pinned to its lineage (ExpectedLineage),
// and counting that Job records the lineage and drops the mark.

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
		// Known from the newest backup (an object that wrote states before the annotation, or
		// one whose state came back from the replica store: its adopt opt-in is spent too).
		SetAnnotation(o, infrav1.StateLineageAnnotation, own)
		if o.GetAnnotations()[infrav1.AdoptStateAnnotation] == own {
			RemoveAnnotation(o, infrav1.AdoptStateAnnotation)
		}
	}
	RemoveAnnotation(o, infrav1.StateFirstRunAnnotation)
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

// FirstRunMark is the value of captf.io/state-first-run for the object of uid and its Job.
func FirstRunMark(uid types.UID, job string) string { return string(uid) + "/" + job }

// IsFirstRunMark reports whether v is a first-run mark of the object of uid.
func IsFirstRunMark(v string, uid types.UID) bool {
	return uid != "" && strings.HasPrefix(v, string(uid)+"/")
}

// NoteFirstRun marks o when the Job about to start (op, job) is the object's first mutating
// Job and no state exists: the state found after it is the one it wrote. An existing mark is
// kept.
func NoteFirstRun(o metav1.Object, ev Evidence, op infrav1.Operation, job string) {
	if !op.Mutating() || ev.State.Read != StateAbsent || ev.State.OwnLineage != "" {
		return
	}
	if IsFirstRunMark(o.GetAnnotations()[infrav1.StateFirstRunAnnotation], o.GetUID()) {
		return
	}
	SetAnnotation(o, infrav1.StateFirstRunAnnotation, FirstRunMark(o.GetUID(), job))
}
