package engine_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// allEvents drains the recorded events whole: "<type> <reason> <note>".
func (f *fakeEnv) allEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A run whose variables the module does not declare succeeds as it did; status.lastRun.message
// names the variables and one Warning event UndeclaredVariables says what to do.
func TestBookkeepingReportsUndeclaredVariables(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finishWith(job, true, corev1.PodSucceeded, &st, func(r *runnerapi.Result) {
		r.Error = ""
		r.UndeclaredVariables = []string{"extra", "typo_size"}
	})
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	o := f.object()
	lr := o.Status.LastRun
	if lr == nil || lr.Outcome != infrav1.RunSucceeded || !o.Status.IsProvisioned() {
		t.Fatalf("status after counting: %+v", o.Status)
	}
	if want := "variables the module does not declare (ignored): extra, typo_size"; lr.Message != want {
		t.Errorf("lastRun.message = %q, want %q", lr.Message, want)
	}
	var warned []string
	var reasons []string
	for _, e := range f.allEvents() {
		fields := strings.Fields(e)
		reasons = append(reasons, fields[1])
		if fields[1] == infrav1.UndeclaredVariablesReason {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("events %v, want one %s", reasons, infrav1.UndeclaredVariablesReason)
	}
	e := warned[0]
	for _, want := range []string{corev1.EventTypeWarning + " ", "Job " + job.Name, "extra, typo_size", "spec.variables", "spec.variablesFrom", "declare them in the module"} {
		if !strings.Contains(e, want) {
			t.Errorf("event %q does not say %q", e, want)
		}
	}
	if reasons[0] != "JobSucceeded" {
		t.Errorf("events %v: the run's own event comes first", reasons)
	}
}

func TestBookkeepingReportsNoUndeclaredVariablesWhenThereAreNone(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finishWith(job, true, corev1.PodSucceeded, &st, func(r *runnerapi.Result) { r.Error = "" })
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "JobSucceeded" {
		t.Errorf("events = %v, want [JobSucceeded]", ev)
	}
	if lr := f.object().Status.LastRun; lr == nil || lr.Message != "" {
		t.Errorf("lastRun = %+v, want no message", lr)
	}
}
