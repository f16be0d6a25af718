package decide

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var (
	healthy   = &runnerapi.HealthSample{Healthy: true, Message: "ok"}
	unhealthy = &runnerapi.HealthSample{Message: "disk full"}
	badHealth = &runnerapi.HealthSample{Invalid: `output "health" must be a bool or an object {healthy = bool, message = string}`}
)

// The counting rule: an unhealthy sample adds one, a healthy one starts again, a bad value
// leaves the count, no output means no count.
func TestHealthRecordCounting(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	var rec *infrav1.HealthRecord
	step := func(s *runnerapi.HealthSample, want int32) {
		t.Helper()
		rec = NextHealthRecord(rec, s, "job-x", at)
		if rec.Unhealthy != want {
			t.Fatalf("after %+v: count %d, want %d", s, rec.Unhealthy, want)
		}
		if back := infrav1.ParseHealthRecord(rec.Annotation()); back == nil || *back != *rec {
			t.Fatalf("the annotation does not round-trip: %+v -> %+v", rec, back)
		}
	}
	step(unhealthy, 1)
	step(unhealthy, 2)
	step(badHealth, 2)
	if rec.Invalid == "" || rec.Healthy || rec.Message != "disk full" {
		t.Fatalf("a bad value keeps what the last valid sample said and records why: %+v", rec)
	}
	step(unhealthy, 3)
	step(healthy, 0)
	if !rec.Healthy || rec.Message != "ok" {
		t.Fatalf("healthy: %+v", rec)
	}
	step(unhealthy, 1)
	step(nil, 0)
	if !rec.Missing {
		t.Fatalf("no output: %+v", rec)
	}
	step(unhealthy, 1)
	rec.Unhealthy = maxUnhealthyCount
	step(unhealthy, maxUnhealthyCount)
	if rec.Job != "job-x" || rec.At != "2026-12-03T18:00:00Z" {
		t.Fatalf("job and time: %+v", rec)
	}
	for _, s := range []string{"", "{", `{"job":"","at":"2026-12-03T18:00:00Z"}`, `{"job":"j","at":"yesterday"}`, `{"job":"j","at":"2026-12-03T18:00:00Z","unhealthy":-1}`} {
		if r := infrav1.ParseHealthRecord(s); r != nil {
			t.Errorf("%q reads as a record: %+v", s, r)
		}
	}
}

// Ready turns False with InfrastructureUnhealthy once the count reaches the threshold, on a
// provisioned machine only, and never touches provisioned; below the threshold, without a
// health signal (other kinds) and after a healthy sample it stays True.
func TestSetReadyOnUnhealthyInfrastructure(t *testing.T) {
	yes := true
	rec := func(n int32) *infrav1.HealthRecord {
		return &infrav1.HealthRecord{Job: "j", At: "2026-12-03T18:00:00Z", Message: "disk full", Unhealthy: n}
	}
	for name, tc := range map[string]struct {
		health      HealthEvidence
		rep         *infrav1.HealthRecord
		provisioned bool
		want        want
	}{
		"below the threshold":                  {HealthEvidence{Threshold: 3, Last: rec(2)}, nil, true, want{infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason}},
		"at the threshold":                     {HealthEvidence{Threshold: 3, Last: rec(3)}, nil, true, want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnhealthyReason}},
		"over the threshold":                   {HealthEvidence{Threshold: 1, Last: rec(5)}, nil, true, want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnhealthyReason}},
		"this pass's sample reached it":        {HealthEvidence{Threshold: 3, Last: rec(2)}, rec(3), true, want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnhealthyReason}},
		"this pass's healthy sample resets it": {HealthEvidence{Threshold: 3, Last: rec(3)}, &infrav1.HealthRecord{Job: "k", At: "2026-12-03T18:00:00Z", Healthy: true}, true, want{infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason}},
		"no health signal (other kinds)":       {HealthEvidence{Threshold: 0, Last: rec(9)}, nil, true, want{infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason}},
		"not provisioned: provisioning says":   {HealthEvidence{Threshold: 1, Last: rec(1)}, nil, false, want{infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.NotProvisionedReason}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			if tc.provisioned {
				st.Initialization = &infrav1.Initialization{Provisioned: &yes}
			}
			setReady(conditions{st: st}, Evidence{Health: tc.health}, Report{HealthRecord: tc.rep})
			checkConditions(t, st, []want{tc.want})
			if tc.provisioned != st.IsProvisioned() {
				t.Fatalf("provisioned changed to %v", st.IsProvisioned())
			}
			if tc.want.Reason == infrav1.InfrastructureUnhealthyReason {
				if msg := readyMessage(st); !strings.Contains(msg, "disk full") || !strings.Contains(msg, "MachineHealthCheck") {
					t.Fatalf("message %q", msg)
				}
			}
		})
	}
}

func readyMessage(st *infrav1.TerraformStatus) string {
	for _, c := range st.Conditions {
		if c.Type == infrav1.ReadyCondition {
			return c.Message
		}
	}
	return ""
}

// InfrastructureHealthy: True, False, or Unknown with what is missing; absent on kinds
// without a health signal.
func TestSetInfrastructureHealthy(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		health HealthEvidence
		want   want
	}{
		"no signal":   {HealthEvidence{}, want{Type: infrav1.InfrastructureHealthyCondition}},
		"no sample":   {HealthEvidence{Threshold: 3}, want{infrav1.InfrastructureHealthyCondition, metav1.ConditionUnknown, infrav1.NoHealthSampleReason}},
		"no output":   {HealthEvidence{Threshold: 3, Last: NextHealthRecord(nil, nil, "j", at)}, want{infrav1.InfrastructureHealthyCondition, metav1.ConditionUnknown, infrav1.NoHealthOutputReason}},
		"a bad value": {HealthEvidence{Threshold: 3, Last: NextHealthRecord(nil, badHealth, "j", at)}, want{infrav1.InfrastructureHealthyCondition, metav1.ConditionUnknown, infrav1.HealthOutputInvalidReason}},
		"healthy":     {HealthEvidence{Threshold: 3, Last: NextHealthRecord(nil, healthy, "j", at)}, want{infrav1.InfrastructureHealthyCondition, metav1.ConditionTrue, infrav1.HealthyReason}},
		"unhealthy":   {HealthEvidence{Threshold: 3, Last: NextHealthRecord(nil, unhealthy, "j", at)}, want{infrav1.InfrastructureHealthyCondition, metav1.ConditionFalse, infrav1.UnhealthyReason}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &infrav1.TerraformStatus{}
			setInfrastructureHealthy(conditions{st: st}, Evidence{Health: tc.health}, Report{})
			checkConditions(t, st, []want{tc.want})
		})
	}
}

// Events: one on each change of InfrastructureHealthy, and a Warning when the count reaches
// the threshold; none for a sample that changes nothing.
func TestHealthTransition(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	one := NextHealthRecord(nil, unhealthy, "j1", at)
	two := NextHealthRecord(one, unhealthy, "j2", at)
	ok := NextHealthRecord(two, healthy, "j3", at)
	for name, tc := range map[string]struct {
		prev, next  *infrav1.HealthRecord
		typ, reason string
	}{
		"first sample, healthy":       {nil, NextHealthRecord(nil, healthy, "j", at), "Normal", infrav1.HealthyReason},
		"turns unhealthy":             {NextHealthRecord(nil, healthy, "j", at), one, "Warning", infrav1.UnhealthyReason},
		"one more unhealthy: nothing": {one, two, "", ""},
		"reaches the threshold of 2":  {one, two, "", ""},
		"healthy again":               {two, ok, "Normal", infrav1.HealthyReason},
		"no output: not a fault":      {nil, NextHealthRecord(nil, nil, "j", at), "Normal", infrav1.NoHealthOutputReason},
		"a bad value":                 {one, NextHealthRecord(one, badHealth, "j4", at), "Warning", infrav1.HealthOutputInvalidReason},
	} {
		threshold := int32(3)
		if name == "reaches the threshold of 2" {
			threshold = 2
			tc.typ, tc.reason = "Warning", infrav1.InfrastructureUnhealthyReason
		}
		typ, reason, note, fired := HealthTransition(tc.prev, tc.next, threshold)
		if typ != tc.typ || reason != tc.reason || fired != (tc.typ != "") || (fired && note == "") {
			t.Errorf("%s: got %q %q %q %v, want %q %q", name, typ, reason, note, fired, tc.typ, tc.reason)
		}
	}
}

// Markers counts a sample once, in the patch that counts its Job, and only a successful one.
func TestMarkersRecordTheHealthSample(t *testing.T) {
	at := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	o := objects.Machine("ns", "m").Obj()
	cur := JobView{Name: "d1", Operation: infrav1.OperationDrift, Seq: 4}
	Bookkept{Job: "d1", Op: infrav1.OperationDrift, Outcome: infrav1.RunSucceeded, At: at, HealthSampled: true, Health: unhealthy}.Markers(o, cur, "")
	Bookkept{Job: "d2", Op: infrav1.OperationDrift, Outcome: infrav1.RunSucceeded, At: at, HealthSampled: true, Health: unhealthy}.Markers(o, cur, "")
	Bookkept{Job: "d3", Op: infrav1.OperationDrift, Outcome: infrav1.RunFailed, At: at, HealthSampled: true, Health: unhealthy}.Markers(o, cur, "")
	Bookkept{Job: "d4", Op: infrav1.OperationDrift, Outcome: infrav1.RunSucceeded, At: at}.Markers(o, cur, "")
	rec := infrav1.ParseHealthRecord(o.Annotations[infrav1.HealthRecordAnnotation])
	if rec == nil || rec.Unhealthy != 2 || rec.Job != "d1" {
		t.Fatalf("record %+v: want two samples counted, the failed Job's and the unsampled Job's not", rec)
	}
	if st := HealthStatusOf(rec); st == nil || st.ConsecutiveUnhealthy != 2 || st.LastSampleTime == nil || !st.LastSampleTime.Time.Equal(at) {
		t.Fatalf("status.health %+v", st)
	}
	if HealthStatusOf(nil) != nil {
		t.Fatal("status.health without a sample")
	}
}
