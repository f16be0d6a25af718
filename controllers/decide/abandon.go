package decide

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The abandon rule (docs/deletion.md, "Abandon"). captf.io/abandon-infrastructure lets a
// deleting object go without a destroy. It applies only when it is meant now: on an object
// that is being deleted and was abandoned after its deletion began, or on one its state holds
// (StateLost, an unreadable state), deleting or not. Anywhere else it is dormant, and a later
// ordinary delete would silently skip the destroy: the admission webhook refuses setting it
// (webhooks.AbandonApplies), and the engine voids one that got past (the webhook down or
// not installed, or set before this rule): Decide sets Decision.VoidAbandon, the engine removes
// the annotation and emits the Warning event AbandonVoided.

// AbandonApplies reports whether the abandon on a deleting object lets it go: its state holds
// it, or the annotation was not proven to be set before the deletion began. It does not look
// at ev.Abandon: the caller does.
func AbandonApplies(ev Evidence) bool {
	return stateHold(ev) != nil || !ev.Object.AbandonPredates
}

// AbandonVoid says why the object's abandon annotation is void, or "" when it is not (or the
// pass cannot tell yet). It judges only a settled pass: the finalizer on, not paused, nothing
// running or waiting to be counted, the live checks clean, and the decision inputs and the
// state read, so that a state hold is known. Then the abandon is void on an object that is not
// being deleted and that its state does not hold, and on a deleting object its state does not
// hold whose abandon was set before the deletion began.
func AbandonVoid(ev Evidence) string {
	if !ev.Object.Abandon || !ev.Object.HasFinalizer || ev.Object.Paused || len(ev.Jobs.Running) > 0 ||
		(ev.Jobs.Current != nil && ev.Jobs.Current.Phase == JobFinished) ||
		(NeedsLagCheck(ev) && (!ev.Lag.Checked || ev.Lag.Found)) ||
		!ev.Inputs.Gathered || ev.State.Read == StateNotRead || stateHold(ev) != nil {
		return ""
	}
	switch {
	case !ev.Object.Deleting:
		return "the annotation " + infrav1.AbandonInfrastructureAnnotation + " was removed: the object is not being deleted and its state " +
			"does not hold it, so the abandon would lie dormant and let a later ordinary delete skip the destroy. A delete destroys; " +
			"to abandon, delete the object first and then set the annotation on the deleting object (see docs/deletion.md)"
	case ev.Object.AbandonPredates:
		return "the annotation " + infrav1.AbandonInfrastructureAnnotation + " was removed: it was set before the deletion began, on an " +
			"object its state does not hold, so it does not count and the destroy runs. To abandon, set it again on the deleting " +
			"object (see docs/deletion.md)"
	}
	return ""
}

// AbandonPredates judges, for a deleting object that carries an abandon, whether the abandon
// was set before the deletion began, from the object as the cache shows it and as the API
// server shows it now (live nil: it is gone). When the API server no longer shows the abandon
// the cache shows (or the object is gone, or is another incarnation), the abandon is not
// honoured this pass (true): every write of the pass carries the cached resourceVersion and
// conflicts, and the next pass decides on the newer object. Otherwise the managed fields
// decide (AbandonSetBefore).
func AbandonPredates(cached, live metav1.Object) bool {
	key := infrav1.AbandonInfrastructureAnnotation
	if live == nil || live.GetUID() != cached.GetUID() || live.GetAnnotations()[key] != cached.GetAnnotations()[key] {
		return true
	}
	return AbandonSetBefore(live)
}

// AbandonSetBefore reports whether the managed fields of o prove that the abandon annotation
// was last set before the deletion began: every field manager that owns the annotation last
// wrote strictly before the deletion timestamp (both at the API server's one-second
// resolution). It is false when o is not deleting, when no entry owns the annotation (the
// managed fields were cleared), or when an owner's time is unknown, the same second as the
// deletion or later: an owner's time is the last time it changed any of its fields, so a
// later time does not prove the abandon came after the deletion, and the abandon is then
// taken as meant (the limit documented in docs/deletion.md).
func AbandonSetBefore(o metav1.Object) bool {
	del := o.GetDeletionTimestamp()
	if del == nil {
		return false
	}
	var latest time.Time
	owned := false
	for _, e := range o.GetManagedFields() {
		if !ownsAnnotation(e, infrav1.AbandonInfrastructureAnnotation) {
			continue
		}
		if e.Time == nil {
			return false
		}
		owned = true
		if e.Time.After(latest) {
			latest = e.Time.Time
		}
	}
	return owned && latest.Truncate(time.Second).Before(del.Truncate(time.Second))
}

// ownsAnnotation reports whether a managed fields entry owns metadata.annotations[key].
func ownsAnnotation(e metav1.ManagedFieldsEntry, key string) bool {
	if e.FieldsV1 == nil || e.Subresource != "" {
		return false
	}
	var root struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &root); err != nil {
		return false
	}
	_, ok := root.Metadata.Annotations["f:"+key]
	return ok
}
