package webhooks

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The manager's records (docs/webhooks.md, "The manager's records"): the annotations of
// infrav1.ManagerRecordAnnotations are what the controller wrote about what it did and found;
// only the manager itself and the override groups may set, change or remove them, on update and
// on create. A create is judged as an update from nothing: the same diff (DiffRecords) from an
// empty old object, the same verdict (JudgeRecords). On a create, the guarded requests
// (infrav1.GuardedRequestAnnotations: approve-plan, adopt-state, abandon-infrastructure) count
// too: a new object carries no approval, adoption or abandon that nobody judged.

// lineageRecords are the records of the state's identity: clusterctl move may drop them from the
// source copy it deletes (DiffRecords).
var lineageRecords = []string{infrav1.StateLineageAnnotation, infrav1.StateLineageSeenAnnotation, infrav1.StateFirstRunAnnotation}

// RecordChange is what one request does to the manager's records and the guarded requests.
type RecordChange struct {
	// Records names the manager's records the request sets, changes or removes, in the order
	// of infrav1.ManagerRecordAnnotations.
	Records []string
	// Requests names the guarded requests the request sets or changes (judged here on a create
	// only; on an update each has its own rule: JudgePlan, judgeIdentity, judgeAbandon).
	Requests []string
	// Contract names the contract fields the request sets, changes or removes: spec.providerID
	// and spec.providerIDList, which the controller fills from the module's outputs and Cluster
	// API reads as the machine's identity. They are records like the annotations: judged on a
	// create and on an update alike.
	Contract []string
	// MoveMark: the request sets clusterctl's delete-for-move, on a create or an update. A
	// paused object deleted with it lets go without a destroy, keeping its state for the move's
	// target: only clusterctl move, run by the manager's identity or an override group member
	// (docs/move.md, "Who may run a move"), sets it.
	MoveMark bool
}

// DiffRecords compares the annotations of the old and the new object (on a create the old is
// empty Marks). It is pure. Two removals are no change of a record:
//   - captf.io/retry-at: removing it is a person's request to retry now (kubectl captf retry);
//     it cannot make the controller believe anything happened.
//   - the lineage records, on an object that carries delete-for-move after the request:
//     clusterctl move marks the source copy it is about to delete with a JSON patch that
//     replaces all its annotations by delete-for-move alone. The record lives on in the target
//     copy, and removing it can only make the object hold (RetainedStateFound), never take a
//     state over. Setting or changing it still is a change.
func DiffRecords(oldM, newM *Marks) RecordChange {
	var ch RecordChange
	_, moving := newM.Annotations[infrav1.DeleteForMoveAnnotation]
	for _, k := range infrav1.ManagerRecordAnnotations() {
		was, had := oldM.Annotations[k]
		is, has := newM.Annotations[k]
		if had == has && was == is {
			continue
		}
		if !has && k == infrav1.RetryAtAnnotation {
			continue
		}
		if moving && !has && slices.Contains(lineageRecords, k) {
			continue
		}
		ch.Records = append(ch.Records, k)
	}
	for _, k := range infrav1.GuardedRequestAnnotations() {
		was, had := oldM.Annotations[k]
		if is, has := newM.Annotations[k]; has && (!had || was != is) {
			ch.Requests = append(ch.Requests, k)
		}
	}
	if oldM.Spec.ProviderID != newM.Spec.ProviderID {
		ch.Contract = append(ch.Contract, ContractProviderID)
	}
	if !slices.Equal(oldM.Spec.ProviderIDList, newM.Spec.ProviderIDList) {
		ch.Contract = append(ch.Contract, ContractProviderIDList)
	}
	_, hadMark := oldM.Annotations[infrav1.DeleteForMoveAnnotation]
	ch.MoveMark = moving && !hadMark
	return ch
}

// The contract fields the records rule judges, as messages name them.
const (
	ContractProviderID     = "spec.providerID"
	ContractProviderIDList = "spec.providerIDList"
)

// RecordVerdict is the judgement of the records rule on one request.
type RecordVerdict struct {
	// Allowed: the request writes no record, or its user may.
	Allowed bool
	// Message says why not and what to do (empty when allowed).
	Message string
}

// JudgeRecords applies the records rule. It is pure.
//
//   - On a create and an update alike, a request that sets, changes or removes a contract
//     field (spec.providerID, spec.providerIDList) is allowed only when writer.
//   - On an update, a request that sets, changes or removes a manager's record is allowed only
//     when writer (the user is the manager itself or a member of the override groups).
//   - On a create (create true), a new object that carries a manager's record or a guarded
//     request is allowed only when writer: only clusterctl move, run by an override group
//     member, creates objects that carry what the manager wrote in another cluster.
//
// who names the override groups (Override.Who), ref the object, for the message.
func JudgeRecords(ch RecordChange, create, writer bool, who string, ref ObjectRef) RecordVerdict {
	if writer {
		return RecordVerdict{Allowed: true}
	}
	if ch.MoveMark {
		return RecordVerdict{Message: fmt.Sprintf("CAPTF guard: this request sets %s on %s. That is clusterctl move's mark of the copy it is about to delete: "+
			"a paused object deleted with it lets go without a destroy and leaves its infrastructure and state behind. Only clusterctl move, "+
			"run by a member of the override groups (%s), sets it (docs/move.md, \"Who may run a move\"). To delete the object and its "+
			"infrastructure, delete it without the mark; to keep the infrastructure, use spec.deletionPolicy Retain (docs/deletion.md).",
			infrav1.DeleteForMoveAnnotation, ref, who)}
	}
	if len(ch.Contract) > 0 {
		return RecordVerdict{Message: fmt.Sprintf("CAPTF guard: this request sets, changes or removes %s on %s. The controller fills it from the module's "+
			"outputs (provider_id, provider_id_list) once an apply ran, and Cluster API reads it as the machine's identity: only the CAPTF manager and "+
			"members of the override groups (%s, as clusterctl move does) may write it. Leave it out of the object (and its template); the module's "+
			"outputs set it (docs/module-contract.md).", strings.Join(ch.Contract, ", "), ref, who)}
	}
	if create {
		carried := append(slices.Clone(ch.Records), ch.Requests...)
		if len(carried) == 0 {
			return RecordVerdict{Allowed: true}
		}
		return RecordVerdict{Message: fmt.Sprintf("CAPTF guard: this request creates %s with %s. A new object starts without the manager's records "+
			"and without an approval, a state adoption or an abandon nobody judged: only the CAPTF manager and members of the override groups (%s) "+
			"may create an object that carries them, as clusterctl move does. Create the object without them; to take over a retained state, "+
			"ask an override group member to set %s after the create (docs/state.md); to run clusterctl move, run it as a member of the override groups (docs/move.md).",
			ref, strings.Join(carried, ", "), who, infrav1.AdoptStateAnnotation)}
	}
	if len(ch.Records) == 0 {
		return RecordVerdict{Allowed: true}
	}
	return RecordVerdict{Message: fmt.Sprintf("CAPTF guard: this request sets, changes or removes %s on %s; these annotations are the controller's records "+
		"of what it did and found (docs/webhooks.md), and only the CAPTF manager may write them (or a member of the override groups: %s). %s",
		strings.Join(ch.Records, ", "), ref, who, recordHint(ch.Records))}
}

// recordHint says what to do instead of writing records.
func recordHint(records []string) string {
	var hints []string
	if slices.Contains(records, infrav1.PendingPlanAnnotation) || slices.Contains(records, infrav1.AppliedPlanAnnotation) {
		hints = append(hints, fmt.Sprintf("To approve a plan set %s=<status.pendingPlan.id>; to drop a pending plan change the inputs or wait for the next plan (docs/plans.md).",
			infrav1.ApprovePlanAnnotation))
	}
	if slices.ContainsFunc(records, func(k string) bool { return slices.Contains(lineageRecords, k) }) {
		hints = append(hints, fmt.Sprintf("Changing the state lineage record would let the object run against another state; to bring the object's own state back, "+
			"restore a backup with %s (docs/state.md).", infrav1.RestoreStateAnnotation))
	}
	if slices.Contains(records, infrav1.RetryAtAnnotation) {
		hints = append(hints, fmt.Sprintf("To retry now, remove %s (kubectl captf retry).", infrav1.RetryAtAnnotation))
	}
	if len(hints) == 0 {
		hints = append(hints, "Leave them as the manager wrote them.")
	}
	return strings.Join(hints, " ")
}

// ValidateTemplateContract refuses a template that would stamp a contract field (providerID,
// providerIDList; path is spec.template.spec) onto the objects Cluster API creates: Cluster API
// creates them as its own identity, and the controller fills these fields from the module's
// outputs on each object (DiffRecords judges them on the objects themselves). It is pure.
func ValidateTemplateContract(path *field.Path, providerID string, providerIDList []string) field.ErrorList {
	var errs field.ErrorList
	if providerID != "" {
		errs = append(errs, field.Forbidden(path.Child("providerID"),
			"the controller fills providerID on each machine from the module's provider_id output (docs/module-contract.md): a template must not stamp it; remove it from the template"))
	}
	if len(providerIDList) > 0 {
		errs = append(errs, field.Forbidden(path.Child("providerIDList"),
			"the controller fills providerIDList on each pool from the module's provider_id_list output (docs/module-contract.md): a template must not stamp it; remove it from the template"))
	}
	return errs
}
