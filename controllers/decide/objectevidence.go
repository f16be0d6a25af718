package decide

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Source is a CAPTF object as the evidence reads it: its metadata, spec and status.
type Source interface {
	metav1.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// ObjectEvidenceOf is the evidence the cached object itself gives (no read): its deletion and
// marks, its run sequence, the annotations that ask for something (an abandon or a destroy
// without a plan counts only when it names this incarnation's UID), its plans, restore, retry
// and its drift and health schedule. The engine adds what it reads beside the object (Cluster,
// Jobs, Secrets, policies), then calls IdentityOf.
//   - defaultInterval is the manager's drift interval for objects that set none;
//   - started is when the manager started (DriftDueAt spreads checks due before it).
func ObjectEvidenceOf(o Source, now time.Time, defaultInterval time.Duration, started time.Time) Evidence {
	ann, spec, st := o.GetAnnotations(), o.GetTerraformSpec(), o.GetTerraformStatus()
	ev := Evidence{
		Now: now,
		Object: ObjectEvidence{
			Deleting: !o.GetDeletionTimestamp().IsZero(), HasFinalizer: hasFinalizer(o, infrav1.Finalizer),
			MoveDeletion: hasKey(ann, infrav1.DeleteForMoveAnnotation), BlockMove: hasKey(ann, infrav1.BlockMoveAnnotation),
			Provisioned: st.IsProvisioned(), Destroyed: ann[infrav1.DestroyedAnnotation] == "true",
			DeletionPolicy:     spec.DeletionPolicy,
			Abandon:            namesIncarnation(ann[infrav1.AbandonInfrastructureAnnotation], o.GetUID()),
			DestroyWithoutPlan: namesIncarnation(ann[infrav1.DestroyWithoutPlanAnnotation], o.GetUID()),
		},
		Jobs:   JobsEvidence{RunSeq: RunSeqOf(ann)},
		Inputs: InputsEvidence{AppliedHash: ann[infrav1.AppliedHashAnnotation]},
	}
	if st.ActiveJob != nil {
		ev.Object.ActiveJob = st.ActiveJob.Name
	}
	ev.State.RestoreSerial = ann[infrav1.RestoreStateAnnotation]
	ev.State.RestoreFailed = ann[infrav1.RestoreFailedAnnotation]
	ev.State.BackupDue = ann[infrav1.BackupDueAnnotation]
	ev.Plan.ApplyPolicy, ev.Plan.DestructiveChanges = spec.ApplyPolicy, spec.DestructiveChanges
	ev.Plan.Pending = infrav1.ParsePlanRecord(ann[infrav1.PendingPlanAnnotation])
	ev.Plan.Approved, ev.Plan.Applied = ann[infrav1.ApprovePlanAnnotation], ann[infrav1.AppliedPlanAnnotation]
	if t, err := time.Parse(time.RFC3339, ann[infrav1.RetryAtAnnotation]); err == nil {
		ev.Retry.At = t
		ev.Retry.LastError = ann[infrav1.LastErrorAnnotation]
	}
	driftSchedule(&ev, o, defaultInterval, started)
	return ev
}

// NeedsAbandonOrder reports whether the pass must read the object live for when its abandon
// was set (AbandonPredates): only a deleting object that carries an abandon.
func NeedsAbandonOrder(ev Evidence) bool {
	return ev.Object.Deleting && ev.Object.Abandon
}

// IdentityOf completes the state's identity in ev from the object's annotations, once the
// backups are gathered: its own lineage (the annotation, or for an object that wrote states
// before the annotation existed, the lineage of its newest backup), its adopt opt-in, whether
// its first run was marked, whether the lineage it last saw differs, and whether it ever
// applied (AppliedBefore).
func IdentityOf(ev *Evidence, ann map[string]string, uid types.UID) {
	s := &ev.State
	s.OwnLineage = ann[infrav1.StateLineageAnnotation]
	if s.OwnLineage == "" && len(s.Backups) > 0 {
		s.OwnLineage = s.Backups[0].Lineage
	}
	s.AdoptLineage = ann[infrav1.AdoptStateAnnotation]
	s.FirstRun = s.OwnLineage == "" && IsFirstRunMark(ann[infrav1.StateFirstRunAnnotation], uid)
	seen := ann[infrav1.StateLineageSeenAnnotation]
	s.LineageSuspect = seen != "" && seen != s.OwnLineage
	s.AppliedBefore = ev.Inputs.AppliedHash != "" || ev.Object.Provisioned || len(s.Backups) > 0 || s.OwnLineage != ""
}

// driftSchedule computes when the next drift check is due, from the spec, the manager's
// default interval and the durable last-check annotation, and what the annotations ask of
// drift and health.
func driftSchedule(ev *Evidence, o Source, defaultInterval time.Duration, started time.Time) {
	drift, ann := o.GetTerraformSpec().Drift, o.GetAnnotations()
	ev.Drift.Mode = drift.Mode
	ev.Drift.Remediate = ann[infrav1.RemediateAnnotation]
	ev.Drift.RefreshRequest = ann[infrav1.RefreshAnnotation]
	ev.Drift.CheckRequest = ann[infrav1.DriftCheckAnnotation]
	ev.Target = targetEvidence(ann)
	ev.Drift.Last = infrav1.ParseDriftRecord(ann[infrav1.DriftFindingAnnotation])
	interval := defaultInterval
	if drift.Interval != nil {
		interval = drift.Interval.Duration
	}
	last, _ := time.Parse(time.RFC3339, ann[infrav1.LastDriftCheckAnnotation])
	ev.Drift.DueAt = DriftDueAt(last, o.GetCreationTimestamp().Time, started, interval, o.GetUID())
	if hr, ok := o.(infrav1.HealthReporter); ok {
		ev.Health.Threshold = hr.HealthThreshold()
		ev.Health.Last = infrav1.ParseHealthRecord(ann[infrav1.HealthRecordAnnotation])
	}
}

// RunSeqOf is the object's run sequence (captf.io/run-seq), 1 when unset or not a positive
// number.
func RunSeqOf(ann map[string]string) int64 {
	if v, err := strconv.ParseInt(ann[infrav1.RunSeqAnnotation], 10, 64); err == nil && v > 0 {
		return v
	}
	return 1
}

// namesIncarnation: an annotation that names an incarnation counts only for that one.
func namesIncarnation(value string, uid types.UID) bool {
	return uid != "" && value == string(uid)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func hasFinalizer(o metav1.Object, f string) bool {
	for _, x := range o.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}
