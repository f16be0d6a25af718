package main

import (
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestDriftCheckWhen: drift check says when the controller starts the check it asked for, from
// what the object shows (paused, never applied, a Job running, or idle).
func TestDriftCheckWhen(t *testing.T) {
	provisioned := true
	for _, tc := range []struct {
		name   string
		ann    map[string]string
		active *infrav1.ActiveJob
		prov   bool
		want   string
	}{
		{name: "idle", ann: map[string]string{infrav1.AppliedHashAnnotation: "h1"}, prov: true,
			want: "a Drift Job runs as soon as nothing else runs (an apply, restore or refresh that is wanted goes first), whatever the schedule"},
		{name: "paused", ann: map[string]string{infrav1.AppliedHashAnnotation: "h1", infrav1.PausedAnnotation: ""}, prov: true,
			want: "the object is paused: the Drift Job runs once it is unpaused"},
		{name: "never applied", want: "the object has not applied yet: the Drift Job runs after its first apply"},
		{name: "a Job runs", ann: map[string]string{infrav1.AppliedHashAnnotation: "h1"}, prov: true,
			active: &infrav1.ActiveJob{Name: "captf-x-4", Operation: infrav1.OperationApply}, want: "Job captf-x-4 runs now: the Drift Job follows it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc1 := objects.Cluster("ns", "c").Annotations(tc.ann).Obj()
			tc1.Status.ActiveJob = tc.active
			if tc.prov {
				tc1.Status.Initialization = &infrav1.Initialization{Provisioned: &provisioned}
			}
			got := driftCheckWhen(tc1)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("driftCheckWhen = %q, want it to start with %q", got, tc.want)
			}
			if !strings.Contains(got, "DriftCheckAnswered") {
				t.Fatalf("driftCheckWhen = %q does not say how the answer comes", got)
			}
		})
	}
}
