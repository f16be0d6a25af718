package decide

import (
	"testing"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// A mutating Job counted while paused records its backup as due (the Job's name); one counted
// with its backup taken records nothing, and leaves an earlier due record to the next pass.
func TestMarkersRecordADueBackup(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	o := objects.Machine("ns", "m").Obj()
	Bookkept{Job: "captf-m-1", Op: infrav1.OperationApply, Outcome: infrav1.RunSucceeded, At: at}.
		Markers(o, JobView{Name: "captf-m-1", Seq: 1, Operation: infrav1.OperationApply}, "")
	if v, ok := o.Annotations[infrav1.BackupDueAnnotation]; ok {
		t.Fatalf("a Job backed up when counted records a due backup %q", v)
	}
	Bookkept{Job: "captf-m-2", Op: infrav1.OperationApply, Outcome: infrav1.RunSucceeded, At: at, BackupDue: true}.
		Markers(o, JobView{Name: "captf-m-2", Seq: 2, Operation: infrav1.OperationApply}, "")
	if got := o.Annotations[infrav1.BackupDueAnnotation]; got != "captf-m-2" {
		t.Fatalf("due backup %q, want the paused Job captf-m-2", got)
	}
	Bookkept{Job: "captf-m-3", Op: infrav1.OperationApply, Outcome: infrav1.RunSucceeded, At: at}.
		Markers(o, JobView{Name: "captf-m-3", Seq: 3, Operation: infrav1.OperationApply}, "")
	if got := o.Annotations[infrav1.BackupDueAnnotation]; got != "captf-m-2" {
		t.Fatalf("due backup %q after a later Job: ActionBackup removes it, not the count", got)
	}
	ev := ObjectEvidenceOf(o, at, time.Hour, at)
	if ev.State.BackupDue != "captf-m-2" {
		t.Fatalf("evidence BackupDue %q, want the annotation's", ev.State.BackupDue)
	}
	if BacksUpNow(Evidence{Object: ObjectEvidence{Paused: true}}) || !BacksUpNow(Evidence{}) {
		t.Fatal("BacksUpNow: a paused object's Job is backed up later, another's now")
	}
}
