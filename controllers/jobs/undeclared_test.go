package jobs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The variables the module does not declare are a fact of the run: they come after the other
// facts and before the module's error, and they change no outcome.
func TestOutcomeNamesTheUndeclaredVariables(t *testing.T) {
	done := testJob(cond(batchv1.JobComplete, "CompletionsReached"))
	ok := string(runnerapi.Encode(runnerapi.Result{Operation: "Plan", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{},
		Changes: ptr.To(false), UndeclaredVariables: []string{"extra", "typo_size"}}))
	got := OutcomeOf(done, []corev1.Pod{testPod("a", time.Now(), 0, "", ok)})
	if want := "changes: false; variables the module does not declare (ignored): extra, typo_size"; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
	if got.Outcome != infrav1.RunSucceeded || strings.Join(got.UndeclaredVariables, ",") != "extra,typo_size" || got.UndeclaredTruncated {
		t.Fatalf("%+v", got)
	}

	failedJob := testJob(cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded))
	failed := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{},
		UndeclaredVariables: []string{"extra"}, Error: "apply exited with code 1\nError: quota"}))
	got = OutcomeOf(failedJob, []corev1.Pod{testPod("a", time.Now(), runnerapi.ExitTerraformFailed, "Error", failed)})
	if want := "variables the module does not declare (ignored): extra; apply exited with code 1\nError: quota; Job: Job " + batchv1.JobReasonBackoffLimitExceeded; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
	if got.Outcome != infrav1.RunFailed {
		t.Fatalf("outcome %s, want Failed as the runner said", got.Outcome)
	}

	none := string(runnerapi.Encode(runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}}))
	got = OutcomeOf(done, []corev1.Pod{testPod("a", time.Now(), 0, "", none)})
	if got.Message != "" || got.UndeclaredVariables != nil {
		t.Fatalf("message %q, undeclared %q: want neither", got.Message, got.UndeclaredVariables)
	}
}

func TestVariableListIsBounded(t *testing.T) {
	var names []string
	for i := range runnerapi.MaxUndeclaredVariables {
		names = append(names, fmt.Sprintf("%02d_%s", i, strings.Repeat("v", 60)))
	}
	got := VariableList(names, false, MessageVariablesBytes)
	if len(got) > MessageVariablesBytes+len(", and more") || !strings.HasSuffix(got, ", and more") || !strings.HasPrefix(got, names[0]+", "+names[1]) {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if got := VariableList([]string{"a", "b"}, false, MessageVariablesBytes); got != "a, b" {
		t.Fatalf("%q", got)
	}
	if got := VariableList([]string{"a"}, true, MessageVariablesBytes); got != "a, and more" {
		t.Fatalf("%q, want the runner's truncation said", got)
	}
	if got := VariableList([]string{strings.Repeat("x", 500)}, false, 10); got != strings.Repeat("x", 500) {
		t.Fatalf("the first name is always given (the runner bounds it): %q", got)
	}
	if got := VariableList(nil, true, MessageVariablesBytes); got == "" {
		t.Fatal("no names but more: say so")
	}
}
