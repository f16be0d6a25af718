package decide

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestAPendingJobIsLookedAtAndItsPullFailureReported: a running Job with no ready pod is
// looked at again after PendingRequeue and its pods are read; a pull failure turns the
// operation's condition False with reason ImagePullFailed and the registry's answer, and
// nothing else changes in the decision (the Job is waited for, activeJob kept). A Job whose
// pod is ready reads nothing and sets no requeue.
func TestAPendingJobIsLookedAtAndItsPullFailureReported(t *testing.T) {
	run := JobView{Name: "j1", Operation: infrav1.OperationApply, Phase: JobRunning, Unready: true}
	f := &PullFailure{Pod: "j1-x", Container: "terraform", Image: "127.0.0.1:5000/m:v1", Reason: "ImagePullBackOff", Message: "UNAUTHORIZED: wrong username or password"}
	for name, tc := range map[string]struct {
		run       JobView
		failure   *PullFailure
		needs     bool
		requeue   bool
		condition want
	}{
		"ready pod: nothing read": {JobView{Name: "j1", Operation: infrav1.OperationApply, Phase: JobRunning}, nil, false, false,
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason}},
		"no ready pod, no pull failure": {run, nil, true, true,
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionUnknown, infrav1.JobRunningReason}},
		"no ready pod, a pull failure": {run, f, true, true,
			want{infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.ImagePullFailedReason}},
		"a refresh-only plan reports on the drift condition": {JobView{Name: "j1", Operation: infrav1.OperationPlan, RefreshOnly: true, Phase: JobRunning, Unready: true}, f, true, true,
			want{infrav1.DriftJobSucceededCondition, metav1.ConditionFalse, infrav1.ImagePullFailedReason}},
	} {
		t.Run(name, func(t *testing.T) {
			ev := Evidence{Object: ObjectEvidence{HasFinalizer: true, ActiveJob: "j1", BlockMove: true},
				Jobs: JobsEvidence{Running: []JobView{tc.run}, PullFailure: tc.failure}}
			if got := NeedsPendingPods(ev); got != tc.needs {
				t.Fatalf("NeedsPendingPods = %v, want %v", got, tc.needs)
			}
			d, ok := decideJobs(ev)
			if !ok || d.Action != ActionWaitJob || d.ClearActiveJob || d.SetActiveJob != "" {
				t.Fatalf("decision %+v, want a wait for the running Job that keeps activeJob", d)
			}
			if got := d.Wait != nil && d.Wait.RequeueAfter == PendingRequeue; got != tc.requeue {
				t.Fatalf("wait %+v, want a requeue after %s: %v", d.Wait, PendingRequeue, tc.requeue)
			}
			st := &infrav1.TerraformStatus{}
			setOperation(conditions{st: st}, ev, d, Report{})
			checkConditions(t, st, []want{tc.condition})
			if tc.failure != nil {
				c := meta.FindStatusCondition(st.Conditions, tc.condition.Type)
				for _, s := range []string{"j1", "terraform", "127.0.0.1:5000/m:v1", "ImagePullBackOff", "wrong username or password"} {
					if !strings.Contains(c.Message, s) {
						t.Errorf("message %q does not name %q", c.Message, s)
					}
				}
			}
		})
	}
}

func TestPullFailureMessageIsBounded(t *testing.T) {
	msg := PullFailureMessage("j1", &PullFailure{Message: strings.Repeat("x", 5000)})
	if len(msg) > 1500 {
		t.Fatalf("message of %d bytes", len(msg))
	}
}
