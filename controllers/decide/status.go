package decide

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Report is what acting on a decision produced that the status reports. The setters below
// compute the conditions from the evidence, the decision and the report alone.
type Report struct {
	// LeaseWait: the leases were not acquired; the operation waits.
	LeaseWait *LeaseWait
	// Started names the Job this pass created or adopted.
	Started string
	// StartProblem: the inputs turned out invalid while starting.
	StartProblem *Problem
	// Rejected: the API server refused the Job (the message says why).
	Rejected string
	// Bookkept: the finished Job this pass counted.
	Bookkept *Bookkept
	// Outputs: the module's outputs were read this pass (after an apply, or to recover status).
	Outputs *OutputsResult
	// Recovered: the status was rebuilt from the state without a Job.
	Recovered bool
	// CleanupBlocked says why the cleanup after a destroy could not finish.
	CleanupBlocked string
	// Cleaned: state, inputs and leases are deleted and the finalizer is gone.
	Cleaned bool
	// Backups is the object's backups after this pass took and pruned one (nil: unchanged).
	Backups []BackupView
	// Released: Retain or abandon let the object go with its state kept.
	Released bool
	// Skipped names the Job of another incarnation whose run sequence this pass moved past.
	Skipped string
	// LockHolder: the counted Job could not take the state lock, which this holder has.
	LockHolder *runnerapi.LockHolder
	// SlotWait: the manager runs as many Jobs as it may; the operation waits for a slot.
	SlotWait bool
	// DriftRecord is the drift record as this pass's bookkeeping left it (annotation
	// captf.io/drift-finding; nil: no Job counted this pass).
	DriftRecord *infrav1.DriftRecord
	// HealthRecord is the health record as this pass's bookkeeping left it (annotation
	// captf.io/health; nil: no sample counted this pass).
	HealthRecord *infrav1.HealthRecord
	// Replica: what became of the replication of the state a counted Job left (nil: no
	// replica configured, or nothing to copy).
	Replica *ReplicaResult
	// ReplicaListed is the replica store's listing of the object's versions taken this pass
	// (nil: none was); it replaces status.stateReplica.
	ReplicaListed []ReplicaVersionView
	// StateProblem says why the state cannot be used as it is, found while acting: a version
	// that could not be brought back from the replica store (ActionImportReplica), or a store
	// that holds a newer version than the state Secret (a start held, ReplicaAhead). The object
	// holds on it (StateReadable).
	StateProblem *Problem
	// LagJob names this run's Job, which the start found already ended on the API server
	// while the cache does not show it: counted once the cache does.
	LagJob string
}

// ReplicaResult is one replication of a state version to the replica store.
type ReplicaResult struct {
	// Serial and Lineage are the version's.
	Serial  int64
	Lineage string
	// Written: the store took it now; false with no Reason: it held that version already.
	Written bool
	// Reason and Message say why the store did not take it ("": it holds the version).
	Reason, Message string
	// Time is when the store took or was found to hold it (zero when it did not).
	Time time.Time
	// SecretVersion is the resourceVersion of the state Secret the version was read from.
	SecretVersion string
}

// LeaseWait is a wait for the run lease or the cluster lease (runlease.Wait): the condition of
// the operation's family, its reason and message.
type LeaseWait struct {
	Condition, Reason, Message string
}

// conditions accumulates condition writes with the object's generation.
type conditions struct {
	st  *infrav1.TerraformStatus
	gen int64
}

func (c conditions) set(t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.gen})
}

func (c conditions) find(t string) *metav1.Condition {
	return meta.FindStatusCondition(c.st.Conditions, t)
}

// SetConditions runs every setter in order; Ready, which summarises the others, comes last.
func SetConditions(st *infrav1.TerraformStatus, gen int64, ev Evidence, d Decision, rep Report) {
	c := conditions{st: st, gen: gen}
	setPaused(c, ev)
	setDependenciesReady(c, ev)
	setInputsValid(c, ev, rep)
	setOperation(c, ev, d, rep)
	setOutputsValid(c, rep)
	setStateReadable(c, ev, d, rep)
	setDriftDetected(c, ev, rep)
	setStateBackups(c, ev, rep)
	setStateReplicated(c, rep)
	setStateReplica(c, rep)
	setPendingPlan(c, ev, d)
	setDeleting(c, ev, d, rep)
	setInfrastructureHealthy(c, ev, rep)
	setReady(c, ev, rep)
}

// setStateReadable reports whether the state can be used; it says something only when the
// state was read live this pass, or when a hold decided on it.
func setStateReadable(c conditions, ev Evidence, d Decision, rep Report) {
	if h := rep.LockHolder; h != nil {
		c.set(infrav1.StateReadableCondition, metav1.ConditionFalse, infrav1.StateLockedReason, fmt.Sprintf(
			"the state lock is held by %s (lock %s, %s since %s), which is not a finished Job of this object, so it is never broken: "+
				"once the holder is done the next run proceeds; if the holder is gone, release the lock by hand (docs/runbooks/stale-lock.md)",
			orUnknown(h.Who), h.ID, orUnknown(h.Operation), orUnknown(h.Created)))
		return
	}
	if b := rep.Bookkept; b != nil && b.Outcome == infrav1.RunSucceeded && b.Op.Mutating() {
		c.set(infrav1.StateReadableCondition, metav1.ConditionTrue, infrav1.StateReadableReason, "")
		return
	}
	if w := d.Wait; w != nil && w.ConditionType == infrav1.StateReadableCondition {
		c.set(infrav1.StateReadableCondition, metav1.ConditionFalse, w.Reason, w.Message)
		return
	}
	if pr := rep.StateProblem; pr != nil {
		c.set(infrav1.StateReadableCondition, metav1.ConditionFalse, pr.Reason, pr.Message)
		return
	}
	switch ev.State.Read {
	case StatePresent:
		if cur := c.find(infrav1.StateReadableCondition); cur != nil && cur.Status == metav1.ConditionFalse &&
			cur.Reason == infrav1.StateLockedReason && rep.Bookkept == nil {
			// The state reads fine; the lock report stands until the next Job is counted,
			// which either finds the lock free or reports its holder again.
			return
		}
		c.set(infrav1.StateReadableCondition, metav1.ConditionTrue, infrav1.StateReadableReason, "")
	case StateAbsent:
		if ev.State.AppliedBefore {
			return // a hold reports it; a Retain or abandon lets go of it
		}
		c.set(infrav1.StateReadableCondition, metav1.ConditionTrue, infrav1.NoStateYetReason, "the object has not applied yet")
	case StateUnreadable:
		if pr := ev.State.Problem; pr != nil {
			c.set(infrav1.StateReadableCondition, metav1.ConditionFalse, pr.Reason, pr.Message)
		}
	}
}

// setDriftDetected reports the durable drift record (negative polarity: True means drift):
// what the last check found, and that a successful apply or refresh brought the
// infrastructure and the state in line again. It reads the record, never this pass's memory
// alone, so the pass after a lost status patch reports the same.
func setDriftDetected(c conditions, ev Evidence, rep Report) {
	rec := ev.Drift.Last
	if rep.DriftRecord != nil {
		rec = rep.DriftRecord
	}
	if rec == nil {
		return
	}
	switch rec.Reason {
	case infrav1.DriftFoundReason:
		msg := "the infrastructure differs from the last apply: " + rec.Summary
		switch ev.Drift.Mode {
		case infrav1.DriftModeRemediate:
			msg += "; an apply of the last applied inputs follows (mode Remediate)"
		case infrav1.DriftModeAccept:
			msg = "the infrastructure changed outside Terraform since the state was written: " + rec.Summary +
				"; a refresh-only apply records it in the state and changes nothing (mode Accept)"
		default:
			msg += "; mode Report: nothing is changed"
		}
		c.set(infrav1.DriftDetectedCondition, metav1.ConditionTrue, infrav1.DriftFoundReason, msg)
	case infrav1.NoDriftReason:
		c.set(infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.NoDriftReason, "the last drift check found no drift")
	case infrav1.RemediatedReason:
		c.set(infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.RemediatedReason, "Job "+rec.Job+" applied the module again after the drift check")
	case infrav1.AcceptedReason:
		c.set(infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.AcceptedReason,
			"Job "+rec.Job+" recorded in the state what changed outside Terraform (a refresh-only apply); no infrastructure was changed")
	}
}

// waitsForJob reports a decision that keeps a running Job's marks and reports it: a wait for
// it, or the deletion of a Job that never started (ActionDeleteJob).
func waitsForJob(d Decision) bool { return d.Action == ActionWaitJob || d.Action == ActionDeleteJob }

// waitsForApprover reports the reason of a saved plan that waits for a person: approval is
// asked for (PlanAwaitingApproval), the plan breaks a plan policy rule (PlanPolicyViolated), or
// it is held as corrupt (PlanCorrupt: never applied; a person finds the writer and changes the
// inputs for a new plan).
func waitsForApprover(reason string) bool {
	return reason == infrav1.PlanAwaitingApprovalReason || reason == infrav1.PlanPolicyViolatedReason || reason == infrav1.PlanCorruptReason
}

// setPendingPlan reports the plan that waits for approval; a plan that no longer waits
// (superseded, applied, or no apply wanted any more) is not reported.
func setPendingPlan(c conditions, ev Evidence, d Decision) {
	p := ev.Plan.Pending
	if p == nil || d.Wait == nil || !waitsForApprover(d.Wait.Reason) {
		if !waitsForJob(d) && d.Action != ActionWaitLag {
			c.st.PendingPlan = nil
		}
		return
	}
	c.st.PendingPlan = PendingPlanOf(p)
}

// setStateReplicated reports the last replication of the state (only when one ran this pass:
// the condition keeps what the last one found until the next Job's replication).
func setStateReplicated(c conditions, rep Report) {
	r := rep.Replica
	if r == nil {
		return
	}
	if r.Reason != "" {
		c.set(infrav1.StateReplicatedCondition, metav1.ConditionFalse, r.Reason, fmt.Sprintf(
			"state serial %d (lineage %s) is not in the replica store; runs go on, and the next Job's version is written when the store takes it again: %s",
			r.Serial, r.Lineage, r.Message))
		return
	}
	c.set(infrav1.StateReplicatedCondition, metav1.ConditionTrue, infrav1.StateReplicatedReason,
		fmt.Sprintf("state serial %d (lineage %s) is in the replica store", r.Serial, r.Lineage))
}

// maxReplicaListed is how many of the store's versions status.stateReplica reports.
const maxReplicaListed = 32

// setStateReplica reports the versions the replica store was last seen to hold, newest first:
// this pass's listing when one was taken, else what the status said, plus the version this
// pass's replication found or put in the store.
func setStateReplica(c conditions, rep Report) {
	took := rep.Replica != nil && rep.Replica.Reason == ""
	if rep.ReplicaListed == nil && !took {
		return // nothing new was seen: the status stands as it is
	}
	var listed []infrav1.StateReplicaVersion
	if rep.ReplicaListed != nil {
		for _, v := range rep.ReplicaListed {
			listed = append(listed, replicaVersionStatus(v.Lineage, v.Serial, v.Written))
		}
	} else {
		listed = append(listed, c.st.StateReplica...)
	}
	if r := rep.Replica; took && !slices.ContainsFunc(listed, func(v infrav1.StateReplicaVersion) bool { return v.Lineage == r.Lineage && v.Serial == r.Serial }) {
		listed = append(listed, replicaVersionStatus(r.Lineage, r.Serial, r.Time))
	}
	sortReplicaVersions(listed)
	if len(listed) > maxReplicaListed {
		listed = listed[:maxReplicaListed]
	}
	c.st.StateReplica = listed
}

func replicaVersionStatus(lineage string, serial int64, at time.Time) infrav1.StateReplicaVersion {
	v := infrav1.StateReplicaVersion{Lineage: lineage, Serial: serial}
	if !at.IsZero() {
		t := metav1.NewTime(at)
		v.Time = &t
	}
	return v
}

// sortReplicaVersions orders the store's versions newest first: each lineage's versions
// together, by serial, and the lineages by the newest time the store took one of theirs.
func sortReplicaVersions(listed []infrav1.StateReplicaVersion) {
	newest := map[string]time.Time{}
	for _, v := range listed {
		if v.Time != nil && v.Time.After(newest[v.Lineage]) {
			newest[v.Lineage] = v.Time.Time
		}
	}
	sort.SliceStable(listed, func(i, j int) bool {
		a, b := listed[i], listed[j]
		if a.Lineage != b.Lineage {
			if ta, tb := newest[a.Lineage], newest[b.Lineage]; !ta.Equal(tb) {
				return ta.After(tb)
			}
			return a.Lineage < b.Lineage
		}
		return a.Serial > b.Serial
	})
}

// setStateBackups lists the backups, newest first.
func setStateBackups(c conditions, ev Evidence, rep Report) {
	backups := ev.State.Backups
	if rep.Backups != nil {
		backups = rep.Backups
	}
	var out []infrav1.StateBackup
	for i, b := range backups {
		if i == 32 {
			break
		}
		sb := infrav1.StateBackup{Serial: b.Serial, Secret: b.Name, Bytes: b.Bytes}
		if !b.Time.IsZero() {
			t := metav1.NewTime(b.Time)
			sb.Time = &t
		}
		out = append(out, sb)
	}
	c.st.StateBackups = out
}

// setPaused: True while the object or its Cluster is paused.
func setPaused(c conditions, ev Evidence) {
	if ev.Object.Paused {
		c.set(infrav1.PausedCondition, metav1.ConditionTrue, infrav1.PausedReason,
			"the object or its Cluster is paused: no Job starts, and block-move is cleared once nothing runs")
		return
	}
	c.set(infrav1.PausedCondition, metav1.ConditionFalse, infrav1.NotPausedReason, "")
}

// setDependenciesReady reports the dependency wait of a pass that read its decision inputs.
func setDependenciesReady(c conditions, ev Evidence) {
	if !ev.Inputs.Gathered || ev.Object.Deleting || ev.Object.Paused {
		return
	}
	if w := ev.Inputs.DependencyWait; w != nil {
		c.set(infrav1.DependenciesReadyCondition, metav1.ConditionFalse, w.Reason, w.Message)
		return
	}
	c.set(infrav1.DependenciesReadyCondition, metav1.ConditionTrue, infrav1.DependenciesReadyReason, "")
}

// setInputsValid reports whether the inputs could be assembled.
func setInputsValid(c conditions, ev Evidence, rep Report) {
	if pr := rep.StartProblem; pr != nil {
		c.set(pr.ConditionType, metav1.ConditionFalse, pr.Reason, pr.Message)
		return
	}
	if !ev.Inputs.Gathered || ev.Object.Deleting || ev.Object.Paused || ev.Inputs.DependencyWait != nil {
		return
	}
	if pr := ev.Inputs.Problem; pr != nil {
		c.set(pr.ConditionType, metav1.ConditionFalse, pr.Reason, pr.Message)
		return
	}
	c.set(infrav1.InputsValidCondition, metav1.ConditionTrue, infrav1.InputsAssembledReason, "")
}

// setOperation reports the Job conditions (ApplyJobSucceeded, DriftJobSucceeded,
// RestoreJobSucceeded): a Job running, counted, refused, waiting for a lease or backing off.
func setOperation(c conditions, ev Evidence, d Decision, rep Report) {
	switch {
	case rep.Bookkept != nil:
		b := rep.Bookkept
		if b.Outcome == infrav1.RunSucceeded {
			c.set(familyOfRun(b.Op, b.RefreshOnly), metav1.ConditionTrue, infrav1.JobSucceededReason, fmt.Sprintf("Job %s succeeded", b.Job))
			return
		}
		msg := b.summary()
		if b.Counts {
			msg += fmt.Sprintf(" (retry in %s)", b.Backoff)
		}
		c.set(familyOfRun(b.Op, b.RefreshOnly), metav1.ConditionFalse, infrav1.JobFailedReason, msg)
	case rep.Started != "":
		c.set(familyOfRun(d.Operation, d.RefreshOnly), metav1.ConditionUnknown, infrav1.JobRunningReason, fmt.Sprintf("Job %s runs %s", rep.Started, d.Operation))
	case rep.Rejected != "":
		c.set(FamilyOf(d.Operation), metav1.ConditionFalse, infrav1.JobFailedReason, rep.Rejected)
	case rep.LagJob != "":
		c.set(FamilyOf(d.Operation), metav1.ConditionUnknown, infrav1.CacheLagReason,
			fmt.Sprintf("Job %s of this run already ended on the API server but not yet in the cache; it is counted once the cache shows it", rep.LagJob))
	case rep.LeaseWait != nil:
		w := rep.LeaseWait
		c.set(w.Condition, metav1.ConditionUnknown, w.Reason, w.Message)
	case rep.SlotWait:
		c.set(FamilyOf(d.Operation), metav1.ConditionUnknown, infrav1.WaitingForJobSlotReason,
			fmt.Sprintf("%s waits for a free Job slot: the manager runs as many Jobs at once as --max-active-jobs (and, for drift checks, --max-background-jobs) allows", d.Operation))
	case rep.Recovered:
		c.set(infrav1.ApplyJobSucceededCondition, metav1.ConditionTrue, infrav1.JobSucceededReason,
			"recovered from the state of the last successful apply")
	case waitsForJob(d) && len(ev.Jobs.Running) > 0:
		run := ev.Jobs.Running[0]
		if setPullFailure(c, ev, run) || setStartBlock(c, ev, run) {
			return
		}
		msg := fmt.Sprintf("Job %s runs %s", run.Name, run.Operation)
		if run.Foreign {
			msg = fmt.Sprintf("Job %s of an earlier object of this name still runs %s against the same state; nothing starts until it ends", run.Name, run.Operation)
		}
		c.set(familyOfRun(run.Operation, run.RefreshOnly), metav1.ConditionUnknown, infrav1.JobRunningReason, msg)
	case d.Action == ActionWaitJob && ev.Jobs.Current != nil && d.Wait != nil:
		c.set(familyOfRun(ev.Jobs.Current.Operation, ev.Jobs.Current.RefreshOnly), metav1.ConditionUnknown, infrav1.JobRunningReason, d.Wait.Message)
	case d.Wait != nil && (d.Wait.ConditionType == infrav1.ApplyJobSucceededCondition || d.Wait.ConditionType == infrav1.RestoreJobSucceededCondition ||
		d.Wait.ConditionType == infrav1.DriftJobSucceededCondition && waitsForApprover(d.Wait.Reason)):
		c.set(d.Wait.ConditionType, metav1.ConditionFalse, d.Wait.Reason, d.Wait.Message)
	}
}

// setOutputsValid reports the outputs read this pass.
func setOutputsValid(c conditions, rep Report) {
	o := rep.Outputs
	if o == nil {
		return
	}
	if o.Err == nil {
		c.set(infrav1.OutputsValidCondition, metav1.ConditionTrue, infrav1.OutputsValidReason, "")
		t := true
		c.st.Initialization = &infrav1.Initialization{Provisioned: &t}
		return
	}
	reason := infrav1.OutputInvalidReason
	if o.Reason != "" {
		reason = o.Reason
	}
	c.set(infrav1.OutputsValidCondition, metav1.ConditionFalse, reason, o.Err.Error())
}

// setDeleting reports deletion with Cluster API's semantics: Deleting is True, with what the
// deletion waits for, from the moment the object is deleted; DeletionBlocked is True while a
// cluster waits for its machines and pools.
func setDeleting(c conditions, ev Evidence, d Decision, rep Report) {
	if !ev.Object.Deleting {
		c.set(infrav1.DeletingCondition, metav1.ConditionFalse, infrav1.NotDeletingReason, "")
		meta.RemoveStatusCondition(&c.st.Conditions, infrav1.DeletionBlockedCondition)
		return
	}
	blocked := d.Wait != nil && d.Wait.ConditionType == infrav1.DeletionBlockedCondition
	if blocked {
		c.set(infrav1.DeletionBlockedCondition, metav1.ConditionTrue, d.Wait.Reason, d.Wait.Message)
	} else {
		meta.RemoveStatusCondition(&c.st.Conditions, infrav1.DeletionBlockedCondition)
	}
	reason, msg := infrav1.DestroyingReason, ""
	switch {
	case rep.Cleaned:
		msg = "destroyed; state, inputs and leases deleted"
	case rep.CleanupBlocked != "":
		msg = rep.CleanupBlocked
	case rep.Started != "" || d.Action == ActionDeleteJob || d.Action == ActionWaitJob && len(ev.Jobs.Running) > 0:
		msg = deletionJobMessage(ev, d, rep)
	case d.Action == ActionRemoveFinalizer:
		reason, msg = infrav1.MoveReason, "part of a clusterctl move: nothing is destroyed and the state is kept"
	case d.Action == ActionRetain:
		reason, msg = infrav1.RetainReason, "deletionPolicy Retain: nothing is destroyed; the state, durable inputs and backups are kept (see docs/state.md)"
	case d.Action == ActionAbandon:
		reason, msg = infrav1.AbandonedReason, "the infrastructure was abandoned by an override group member: nothing is destroyed and the state is kept"
	case d.Wait != nil && (blocked || d.Wait.ConditionType == infrav1.DeletingCondition || d.Wait.ConditionType == infrav1.ApplyJobSucceededCondition ||
		d.Wait.ConditionType == infrav1.StateReadableCondition || d.Wait.ConditionType == infrav1.RestoreJobSucceededCondition):
		reason, msg = d.Wait.Reason, d.Wait.Message
	case rep.LeaseWait != nil:
		reason, msg = rep.LeaseWait.Reason, rep.LeaseWait.Message
	default:
		if cur := c.find(infrav1.DeletingCondition); cur != nil && cur.Status == metav1.ConditionTrue {
			return // nothing new to say
		}
		msg = "the object is being deleted"
	}
	c.set(infrav1.DeletingCondition, metav1.ConditionTrue, reason, msg)
}

// deletionJobMessage is what Deleting says of the Job a deleting object starts, deletes or waits
// for; the Plan Job of a destroy plan is named as such, whether it starts or runs.
func deletionJobMessage(ev Evidence, d Decision, rep Report) string {
	destroyPlan := "Job %s makes the destroy plan, which is judged before anything is destroyed (docs/deletion.md)"
	switch {
	case rep.Started != "" && d.DestroyPlan:
		return fmt.Sprintf(destroyPlan, rep.Started)
	case rep.Started != "":
		return "destroy Job " + rep.Started + " runs"
	}
	run := ev.Jobs.Running[0]
	switch {
	case d.Action == ActionDeleteJob:
		return fmt.Sprintf("Job %s (%s) cannot start and never ran terraform: it is deleted, and the deletion goes on once its pods are gone", run.Name, run.Operation)
	case run.DestroyPlan:
		return fmt.Sprintf(destroyPlan, run.Name)
	}
	return fmt.Sprintf("Job %s (%s) runs", run.Name, run.Operation)
}

// setReady summarises the other conditions with Cluster API v1beta2 semantics. A provisioned
// machine whose module reported unhealthy for its threshold of consecutive samples is not
// Ready (InfrastructureUnhealthy): Cluster API mirrors that into the Machine's
// InfrastructureReady, which a MachineHealthCheck acts on. Provisioned stays as it is.
func setReady(c conditions, ev Evidence, rep Report) {
	if ev.Object.Deleting {
		reason, msg := infrav1.DestroyingReason, "the object is being deleted"
		if cur := c.find(infrav1.DeletingCondition); cur != nil && cur.Message != "" {
			reason, msg = cur.Reason, cur.Message
		}
		c.set(infrav1.ReadyCondition, metav1.ConditionFalse, reason, msg)
		return
	}
	for _, t := range []string{infrav1.StateReadableCondition, infrav1.DependenciesReadyCondition, infrav1.InputsValidCondition,
		infrav1.ApplyJobSucceededCondition, infrav1.OutputsValidCondition} {
		if cur := c.find(t); cur != nil && cur.Status == metav1.ConditionFalse {
			if waitsForApprover(cur.Reason) && c.st.IsProvisioned() {
				// The change waits for a person; the infrastructure is the one applied last.
				continue
			}
			c.set(infrav1.ReadyCondition, metav1.ConditionFalse, cur.Reason, cur.Message)
			return
		}
	}
	if c.st.IsProvisioned() {
		if rec := healthRecord(ev, rep); atThreshold(rec, ev.Health.Threshold) {
			c.set(infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnhealthyReason, unhealthyMessage(rec, ev.Health.Threshold))
			return
		}
		c.set(infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason, "")
		return
	}
	reason, msg := infrav1.NotProvisionedReason, "the infrastructure is not provisioned yet"
	for _, t := range []string{infrav1.DependenciesReadyCondition, infrav1.ApplyJobSucceededCondition} {
		if cur := c.find(t); cur != nil && cur.Status != metav1.ConditionTrue {
			reason, msg = cur.Reason, cur.Message
			break
		}
	}
	c.set(infrav1.ReadyCondition, metav1.ConditionFalse, reason, msg)
}

// FamilyOf is the condition that reports an operation (infrav1.Operation.Condition: one rule).
func FamilyOf(op infrav1.Operation) string { return op.Condition() }

// familyOfRun is the condition that reports a Job: its operation's, except that a refresh-only
// plan is reported with the refreshes (DriftJobSucceeded), not with the applies.
func familyOfRun(op infrav1.Operation, refreshOnly bool) string {
	if refreshOnly {
		return FamilyOf(infrav1.OperationRefresh)
	}
	return FamilyOf(op)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
