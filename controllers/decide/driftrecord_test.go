package decide

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestDriftRecordFollowsTheCountedJobs: the record bookkeeping writes in its metadata patch
// (captf.io/drift-finding) says what the last check found and what came of it.
func TestDriftRecordFollowsTheCountedJobs(t *testing.T) {
	found := &infrav1.DriftRecord{Reason: infrav1.DriftFoundReason, Job: "j-4", Summary: "1 to update"}
	none := &infrav1.DriftRecord{Reason: infrav1.NoDriftReason, Job: "j-4"}
	ok := infrav1.RunSucceeded
	for name, tc := range map[string]struct {
		prev *infrav1.DriftRecord
		op   infrav1.Operation
		b    Bookkept
		want *infrav1.DriftRecord // nil: the annotation is left as it was
	}{
		"a check finds drift":                       {nil, infrav1.OperationDrift, Bookkept{Outcome: ok, DriftChecked: true, DriftFound: true, DriftSummary: "2 to update"}, &infrav1.DriftRecord{Reason: infrav1.DriftFoundReason, Job: "j-5", Summary: "2 to update"}},
		"a check after drift finds none":            {found, infrav1.OperationDrift, Bookkept{Outcome: ok, DriftChecked: true}, &infrav1.DriftRecord{Reason: infrav1.NoDriftReason, Job: "j-5"}},
		"a check without a result changes nothing":  {found, infrav1.OperationDrift, Bookkept{Outcome: ok}, nil},
		"a failed check changes nothing":            {found, infrav1.OperationDrift, Bookkept{Outcome: infrav1.RunFailed, DriftChecked: true}, nil},
		"an apply after drift remediates it":        {found, infrav1.OperationApply, Bookkept{Outcome: ok}, &infrav1.DriftRecord{Reason: infrav1.RemediatedReason, Job: "j-5"}},
		"a refresh after drift accepts it":          {found, infrav1.OperationRefresh, Bookkept{Outcome: ok}, &infrav1.DriftRecord{Reason: infrav1.AcceptedReason, Job: "j-5"}},
		"an apply with no drift found says nothing": {none, infrav1.OperationApply, Bookkept{Outcome: ok}, nil},
		"a failed apply remediates nothing":         {found, infrav1.OperationApply, Bookkept{Outcome: infrav1.RunFailed}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			o := &metav1.ObjectMeta{}
			if tc.prev != nil {
				SetAnnotation(o, infrav1.DriftFindingAnnotation, tc.prev.Annotation())
			}
			before := o.Annotations[infrav1.DriftFindingAnnotation]
			tc.b.Job, tc.b.Op, tc.b.At = "j-5", tc.op, time.Unix(0, 0)
			tc.b.Markers(o, JobView{Name: "j-5", Seq: 5, Operation: tc.op}, "")
			got := o.Annotations[infrav1.DriftFindingAnnotation]
			if tc.want == nil {
				if got != before {
					t.Fatalf("record = %s, want it left as %q", got, before)
				}
				return
			}
			if r := infrav1.ParseDriftRecord(got); r == nil || *r != *tc.want {
				t.Fatalf("record = %s, want %+v", got, *tc.want)
			}
		})
	}
}

// TestDriftDetectedComesFromTheRecord: the condition is computed from the durable record on
// every pass, so a pass that counted nothing (the one after a bookkeeping pass whose status
// patch met a conflict: the soak's seed 1494) still reports the last finding, and this pass's
// own record wins over the one it gathered.
func TestDriftDetectedComesFromTheRecord(t *testing.T) {
	drifted := []metav1.Condition{{Type: infrav1.DriftDetectedCondition, Status: metav1.ConditionTrue, Reason: infrav1.DriftFoundReason}}
	rec := func(reason string) *infrav1.DriftRecord { return &infrav1.DriftRecord{Reason: reason, Job: "j-7"} }
	for name, tc := range map[string]struct {
		last, counted *infrav1.DriftRecord
		want          want
	}{
		"no record: the condition is left alone":        {nil, nil, want{infrav1.DriftDetectedCondition, metav1.ConditionTrue, infrav1.DriftFoundReason}},
		"a lost status patch: the record says no drift": {rec(infrav1.NoDriftReason), nil, want{infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.NoDriftReason}},
		"a lost status patch: the record says remedied": {rec(infrav1.RemediatedReason), nil, want{infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.RemediatedReason}},
		"a lost status patch: the record says accepted": {rec(infrav1.AcceptedReason), nil, want{infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.AcceptedReason}},
		"this pass counted a check that found drift":    {rec(infrav1.NoDriftReason), rec(infrav1.DriftFoundReason), want{infrav1.DriftDetectedCondition, metav1.ConditionTrue, infrav1.DriftFoundReason}},
		"this pass counted a check that found none":     {rec(infrav1.DriftFoundReason), rec(infrav1.NoDriftReason), want{infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.NoDriftReason}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{Conditions: append([]metav1.Condition(nil), drifted...)}
			setDriftDetected(conditions{st: st}, Evidence{Drift: DriftEvidence{Last: tc.last}}, Report{DriftRecord: tc.counted})
			checkConditions(t, st, []want{tc.want})
		})
	}
}

func TestParseDriftRecordRefusesWhatItDidNotWrite(t *testing.T) {
	for _, s := range []string{"", "x", `{"reason":"Maybe","job":"j"}`, `{"reason":"NoDrift"}`} {
		if r := infrav1.ParseDriftRecord(s); r != nil {
			t.Errorf("ParseDriftRecord(%q) = %+v, want nil", s, *r)
		}
	}
	r := &infrav1.DriftRecord{Reason: infrav1.DriftFoundReason, Job: "j", Summary: "s"}
	if got := infrav1.ParseDriftRecord(r.Annotation()); got == nil || *got != *r {
		t.Errorf("round trip = %+v, want %+v", got, *r)
	}
}
