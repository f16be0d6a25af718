package decide

import (
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestPausedTable holds Cluster API's pause rule as the engine applies it to the cached and
// the live object: the annotation alone, or the Cluster's spec.paused alone, pauses.
func TestPausedTable(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		cluster *bool
		want    bool
	}{
		{"nothing", nil, nil, false},
		{"annotation with an empty value", map[string]string{infrav1.PausedAnnotation: ""}, nil, true},
		{"cluster paused", nil, &yes, true},
		{"cluster says not paused", map[string]string{"other": "x"}, &no, false},
		{"annotation while the cluster says not paused", map[string]string{infrav1.PausedAnnotation: "true"}, &no, true},
	} {
		if got := Paused(tc.ann, tc.cluster); got != tc.want {
			t.Errorf("%s: Paused = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRunShapeTable holds what a decision's operation means for its Job: which Jobs belong to
// the destroy, run on the durable inputs, plan refresh-only, and which refresh request they
// answer.
func TestRunShapeTable(t *testing.T) {
	accept := Evidence{Drift: DriftEvidence{Mode: infrav1.DriftModeAccept, RefreshRequest: "r1"}}
	report := Evidence{Drift: DriftEvidence{Mode: infrav1.DriftModeReport, RefreshRequest: "r1"}}
	destroyPlan := Decision{DestroyPlan: true}
	refreshPlan := Decision{RefreshOnly: true}
	for _, tc := range []struct {
		name                                 string
		ev                                   Evidence
		d                                    Decision
		op                                   infrav1.Operation
		destroy, durable, refreshOnly, dplan bool
		request                              string
	}{
		{"apply", report, Decision{}, infrav1.OperationApply, false, false, false, false, ""},
		{"plan of an apply", report, Decision{}, infrav1.OperationPlan, false, false, false, false, ""},
		{"destroy", report, Decision{}, infrav1.OperationDestroy, true, true, false, false, ""},
		{"destroy plan", report, destroyPlan, infrav1.OperationPlan, true, true, false, true, ""},
		{"destroy flag on an apply is no destroy", report, destroyPlan, infrav1.OperationApply, false, false, false, false, ""},
		{"restore", report, Decision{}, infrav1.OperationRestore, false, true, false, false, ""},
		{"refresh", report, Decision{}, infrav1.OperationRefresh, false, true, false, false, "r1"},
		{"refresh-only plan", report, refreshPlan, infrav1.OperationPlan, false, false, true, false, "r1"},
		{"drift check under Report", report, Decision{}, infrav1.OperationDrift, false, true, false, false, ""},
		{"drift check under Accept", accept, Decision{}, infrav1.OperationDrift, false, true, true, false, ""},
		{"apply under Accept", accept, Decision{}, infrav1.OperationApply, false, false, false, false, ""},
	} {
		if got := BelongsToDestroy(tc.d, tc.op); got != tc.destroy {
			t.Errorf("%s: BelongsToDestroy = %v, want %v", tc.name, got, tc.destroy)
		}
		if got := UsesDurableInputs(tc.d, tc.op); got != tc.durable {
			t.Errorf("%s: UsesDurableInputs = %v, want %v", tc.name, got, tc.durable)
		}
		if got := RefreshOnly(tc.ev, tc.d, tc.op); got != tc.refreshOnly {
			t.Errorf("%s: RefreshOnly = %v, want %v", tc.name, got, tc.refreshOnly)
		}
		if got := MakesDestroyPlan(tc.d, tc.op); got != tc.dplan {
			t.Errorf("%s: MakesDestroyPlan = %v, want %v", tc.name, got, tc.dplan)
		}
		if got := RefreshRequestOf(tc.ev, tc.d, tc.op); got != tc.request {
			t.Errorf("%s: RefreshRequestOf = %q, want %q", tc.name, got, tc.request)
		}
	}
}

// TestActsOnDrift: found drift is acted on under Remediate and Accept, only reported otherwise.
func TestActsOnDrift(t *testing.T) {
	for mode, want := range map[infrav1.DriftMode]bool{
		infrav1.DriftModeReport: false, infrav1.DriftModeRemediate: true, infrav1.DriftModeAccept: true, "": false,
	} {
		if got := ActsOnDrift(mode); got != want {
			t.Errorf("ActsOnDrift(%q) = %v, want %v", mode, got, want)
		}
	}
}

// TestClusterWait: a live object waits for its Cluster until the label names one the cache has.
func TestClusterWait(t *testing.T) {
	if w := ClusterWait("", false); w == nil || w.Reason != infrav1.WaitingForClusterReason {
		t.Errorf("no label: ClusterWait = %+v", w)
	}
	if w := ClusterWait("c1", false); w == nil || w.ConditionType != infrav1.DependenciesReadyCondition {
		t.Errorf("a Cluster not found: ClusterWait = %+v", w)
	}
	if w := ClusterWait("c1", true); w != nil {
		t.Errorf("the Cluster found: ClusterWait = %+v", w)
	}
}
