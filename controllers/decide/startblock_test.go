package decide

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestAStartBlockIsReportedAndADeletionDoesNotWaitItOut: a running Job whose pod cannot start
// is reported on its operation's condition (False, JobCannotStart): a configuration error at
// once, a block that may heal by itself (no node, volumes, no pod) only after StartGrace. A
// deleting object deletes such a Job (ActionDeleteJob, marks kept) only when its pods prove that
// terraform never started; a live object, or a Job whose main container started, is waited for.
func TestAStartBlockIsReportedAndADeletionDoesNotWaitItOut(t *testing.T) {
	run := JobView{Name: "j1", Operation: infrav1.OperationApply, Phase: JobRunning, Unready: true}
	config := &StartBlock{Pod: "j1-x", Container: "terraform", Reason: "CreateContainerConfigError", Message: `secret "creds" not found`, Since: now, Immediate: true}
	mountNew := &StartBlock{Pod: "j1-x", Reason: "ContainerCreating", Message: `configmap "module" not found`, Since: now.Add(-10 * time.Second)}
	mountOld := &StartBlock{Pod: "j1-x", Reason: "ContainerCreating", Message: `configmap "module" not found`, Since: now.Add(-StartGrace)}
	noPod := &StartBlock{Reason: "NoPod", Since: now.Add(-time.Minute)}
	pull := &PullFailure{Pod: "j1-x", Container: "terraform", Image: "r/m:v1", Reason: "ImagePullBackOff", Message: "denied"}
	for name, tc := range map[string]struct {
		block        *StartBlock
		pull         *PullFailure
		deleting     bool
		neverStarted bool
		action       Action
		reason       string
	}{
		"a configuration error is reported at once":               {config, nil, false, true, ActionWaitJob, infrav1.JobCannotStartReason},
		"a mount block within the grace is still a running Job":   {mountNew, nil, false, true, ActionWaitJob, infrav1.JobRunningReason},
		"a mount block past the grace is reported":                {mountOld, nil, false, true, ActionWaitJob, infrav1.JobCannotStartReason},
		"no pod past the grace is reported":                       {noPod, nil, false, true, ActionWaitJob, infrav1.JobCannotStartReason},
		"a deletion deletes a Job that never started":             {config, nil, true, true, ActionDeleteJob, infrav1.JobCannotStartReason},
		"a deletion deletes a Job with no pod past the grace":     {noPod, nil, true, true, ActionDeleteJob, infrav1.JobCannotStartReason},
		"a deletion deletes a Job whose image cannot be pulled":   {nil, pull, true, true, ActionDeleteJob, infrav1.ImagePullFailedReason},
		"a deletion waits for a block within the grace":           {mountNew, nil, true, true, ActionWaitJob, infrav1.JobRunningReason},
		"a deletion waits for a Job whose main container started": {config, nil, true, false, ActionWaitJob, infrav1.JobCannotStartReason},
		"a deletion waits for a Job that shows no block":          {nil, nil, true, true, ActionWaitJob, infrav1.JobRunningReason},
	} {
		t.Run(name, func(t *testing.T) {
			ev := Evidence{Now: now, Object: ObjectEvidence{HasFinalizer: true, Deleting: tc.deleting, ActiveJob: "j1"},
				Jobs: JobsEvidence{Running: []JobView{run}, StartBlock: tc.block, PullFailure: tc.pull, NeverStarted: tc.neverStarted}}
			d := Decide(ev)
			if d.Action != tc.action {
				t.Fatalf("action %s, want %s (decision %+v)", d.Action, tc.action, d)
			}
			if d.Clears() || !d.SetBlockMove || d.SetActiveJob != "" {
				t.Fatalf("decision %+v must keep block-move (set it) and status.activeJob", d)
			}
			st := &infrav1.TerraformStatus{}
			setOperation(conditions{st: st}, ev, d, Report{})
			status := metav1.ConditionFalse
			if tc.reason == infrav1.JobRunningReason {
				status = metav1.ConditionUnknown
			}
			checkConditions(t, st, []want{{infrav1.ApplyJobSucceededCondition, status, tc.reason}})
		})
	}
}

func TestStartBlockMessageSaysWhatBlocksAndWhatHeals(t *testing.T) {
	for _, tc := range []struct {
		b        *StartBlock
		deleting bool
		names    []string
	}{
		{&StartBlock{Pod: "p", Container: "terraform", Reason: "CreateContainerConfigError", Message: `secret "creds" not found`}, false,
			[]string{"j1", "terraform", "CreateContainerConfigError", `secret "creds" not found`, "activeDeadlineSeconds"}},
		{&StartBlock{Pod: "p", Reason: "ContainerCreating", Message: `configmap "m" not found`}, true,
			[]string{"j1", "FailedMount", `configmap "m" not found`, "no terraform ran"}},
		{&StartBlock{Reason: "NoPod"}, false, []string{"PriorityClass", "kubectl describe job j1"}},
		{&StartBlock{Pod: "p", Reason: "Unschedulable", Message: "0/1 nodes are available"}, false, []string{"no node", "0/1 nodes"}},
		{&StartBlock{Pod: "p", Reason: "ContainerCreating", Message: strings.Repeat("x", 5000)}, false, nil},
	} {
		msg := StartBlockMessage("j1", tc.b, tc.deleting)
		for _, s := range tc.names {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q does not name %q", msg, s)
			}
		}
		if len(msg) > 1500 {
			t.Errorf("message of %d bytes", len(msg))
		}
	}
}
