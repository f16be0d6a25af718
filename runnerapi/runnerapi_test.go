package runnerapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The wire names the runner reads without importing the packages that own them.
func TestWireNamesMatchTheirOwners(t *testing.T) {
	for _, c := range []struct{ runner, owner string }{
		{runnerapi.JobOwnerKindLabel, infrav1.OwnerKindLabel},
		{runnerapi.JobOwnerNameLabel, infrav1.OwnerNameLabel},
		{runnerapi.PodJobNameLabel, batchv1.JobNameLabel},
		{runnerapi.PlanIDAnnotation, infrav1.PlanIDAnnotation},
		{runnerapi.PodPhaseSucceeded, string(corev1.PodSucceeded)},
		{runnerapi.PodPhaseFailed, string(corev1.PodFailed)},
	} {
		if c.runner != c.owner {
			t.Errorf("the runner reads %q where its owner writes %q", c.runner, c.owner)
		}
	}
}

func TestSpellingMatchesTheAPI(t *testing.T) {
	api := []infrav1.Operation{infrav1.OperationApply, infrav1.OperationDestroy, infrav1.OperationPlan,
		infrav1.OperationRefresh, infrav1.OperationDrift, infrav1.OperationRestore}
	if len(api) != len(runnerapi.Operations) {
		t.Fatalf("the API has %d operations, the runner %d", len(api), len(runnerapi.Operations))
	}
	for _, op := range api {
		if !runnerapi.ValidOperation(string(op)) {
			t.Errorf("the runner does not know %s", op)
		}
	}
	for out, api := range map[runnerapi.Outcome]infrav1.RunOutcome{
		runnerapi.OutcomeSucceeded: infrav1.RunSucceeded, runnerapi.OutcomeFailed: infrav1.RunFailed, runnerapi.OutcomeInterrupted: infrav1.RunInterrupted,
		runnerapi.OutcomeFenced: infrav1.RunFenced,
	} {
		if string(out) != string(api) {
			t.Errorf("outcome %s != %s", out, api)
		}
	}
}

func TestCommand(t *testing.T) {
	got := runnerapi.Command(runnerapi.RunnerPath, runnerapi.Invocation{
		Operation: "Plan", ModuleDir: "/m", InputsDir: "/i", WorkDir: "/w", ResultFile: "/r", LockTimeout: 90 * time.Second,
	})
	want := []string{"/captf/bin/runner", "run", "--operation=Plan", "--module-dir=/m", "--inputs-dir=/i", "--work-dir=/w", "--result-file=/r", "--lock-timeout=90s"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
	if got := runnerapi.InstallCommand(); !slices.Equal(got, []string{"/runner", "install", "/captf/bin/runner"}) {
		t.Fatalf("install %q", got)
	}
	got = runnerapi.Command(runnerapi.RunnerPath, runnerapi.Invocation{
		Operation: "Apply", ModuleDir: "/m", InputsDir: "/i", WorkDir: "/w", ResultFile: "/r", LockTimeout: time.Minute, ChannelDir: "/captf/channel",
	})
	if got[len(got)-1] != "--channel-dir=/captf/channel" {
		t.Fatalf("channel run %q", got)
	}
	got = runnerapi.ChannelCommand(runnerapi.RunnerPath, runnerapi.ChannelInvocation{
		Dir: "/captf/channel", Namespace: "ns", Suffix: "0123456789abcdef", Job: "captf-0123456789abcdef-4", RunLease: "captf-run-0123456789abcdef",
		OwnerKind: "TerraformMachine", OwnerName: "m", OwnerUID: "u-1", TokenFile: "/t/token", CAFile: "/t/ca.crt",
	})
	want = []string{"/captf/bin/runner", "channel", "--dir=/captf/channel", "--namespace=ns", "--suffix=0123456789abcdef",
		"--job=captf-0123456789abcdef-4", "--run-lease=captf-run-0123456789abcdef", "--owner-kind=TerraformMachine", "--owner-name=m",
		"--owner-uid=u-1", "--token-file=/t/token", "--ca-file=/t/ca.crt"}
	if !slices.Equal(got, want) {
		t.Fatalf("channel %q", got)
	}
}

func TestLockFieldsAreBoundedAndRoundTrip(t *testing.T) {
	long := strings.Repeat("ü", 400) // 800 bytes of two-byte runes
	r := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFenced, Steps: []runnerapi.Step{{Name: "init"}, {Name: "apply", ExitCode: 1}},
		LockBroken: &runnerapi.LockBroken{LockID: long, Who: long, Pod: long, Job: long},
		LockHolder: &runnerapi.LockHolder{ID: long, Who: long, Operation: long, Created: long},
		Error:      strings.Repeat("Error: locked\n", 500)}
	b := runnerapi.Encode(r)
	if len(b) > runnerapi.MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := runnerapi.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != runnerapi.OutcomeFenced || got.LockBroken == nil || got.LockHolder == nil || len(got.Steps) != 2 {
		t.Fatalf("lost fields: %s", b)
	}
	for _, f := range []string{got.LockBroken.LockID, got.LockBroken.Who, got.LockBroken.Pod, got.LockBroken.Job,
		got.LockHolder.ID, got.LockHolder.Who, got.LockHolder.Operation, got.LockHolder.Created} {
		if len(f) == 0 || len(f) > 256 || !utf8.ValidString(f) {
			t.Fatalf("field of %d bytes (valid UTF-8: %t)", len(f), utf8.ValidString(f))
		}
	}
	if r.LockBroken.LockID != long {
		t.Fatal("Encode changed its argument")
	}
}

func TestEncodeFitsAndKeepsTheEnd(t *testing.T) {
	changes := true
	base := runnerapi.Result{Operation: "Plan", Outcome: runnerapi.OutcomeFailed, Binary: "tofu", Changes: &changes,
		Steps: []runnerapi.Step{{Name: "init", DurationMs: 1200}, {Name: "plan", ExitCode: 1, DurationMs: 99}}}
	cases := map[string]string{
		"short":        "Error: short",
		"ascii":        strings.Repeat("Error: something went wrong\n", 1000) + "END",
		"multi-byte":   strings.Repeat("│ ünïcødé ✓ 日本語 ", 2000) + "END",
		"escape-heavy": strings.Repeat("\x01\"\\<>&\t", 3000) + "END",
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			r := base
			r.Error = msg
			b := runnerapi.Encode(r)
			if len(b) > runnerapi.MaxResultBytes {
				t.Fatalf("%d bytes", len(b))
			}
			got, err := runnerapi.ParseResult(b)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(got.Error, "END") && name != "short" {
				t.Fatalf("lost the end: %q", got.Error[len(got.Error)-20:])
			}
			if name == "short" {
				if got.Error != msg || !strings.Contains(string(b), `"changes":true`) {
					t.Fatalf("short result changed: %s", b)
				}
				return
			}
			if !strings.HasPrefix(got.Error, runnerapi.TruncatedMarker) {
				t.Fatalf("no marker: %q", got.Error[:20])
			}
			// The cut is tight: one more byte of error would not fit (within one rune/escape).
			if len(b) < runnerapi.MaxResultBytes-8 {
				t.Fatalf("only %d bytes used", len(b))
			}
			if len(got.Steps) != 2 || got.Changes == nil || !*got.Changes {
				t.Fatalf("lost fields: %+v", got)
			}
		})
	}
}

func TestEncodeDropsStepsOnlyAsALastResort(t *testing.T) {
	r := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Error: "x"}
	for i := 0; i < 200; i++ {
		r.Steps = append(r.Steps, runnerapi.Step{Name: strings.Repeat("s", 30), ExitCode: 1, DurationMs: 1})
	}
	b := runnerapi.Encode(r)
	if len(b) > runnerapi.MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	var got runnerapi.Result
	if err := json.Unmarshal(b, &got); err != nil || len(got.Steps) == 0 || len(got.Steps) == 200 {
		t.Fatalf("%v, %d steps", err, len(got.Steps))
	}
}

func TestParseResultRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "  ", "not json", `{"operation":"Apply","outcome":"Maybe"}`, `{"operation":"Import","outcome":"Failed"}`, `[1]`} {
		if _, err := runnerapi.ParseResult([]byte(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
	if r, err := runnerapi.ParseResult([]byte(`{"operation":"Drift","outcome":"Succeeded","steps":[],"drift":true}`)); err != nil || r.Drift == nil || !*r.Drift {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := runnerapi.ParseResult([]byte(`{"operation":"Apply","outcome":"Fenced","steps":[]}`)); err != nil || r.Outcome != runnerapi.OutcomeFenced {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestEncodeBoundsTheUndeclaredVariables(t *testing.T) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("var_%02d", i))
	}
	long := strings.Repeat("ü", 100) // 200 bytes of two-byte runes
	names[1] = long

	t.Run("at most MaxUndeclaredVariables, each cut", func(t *testing.T) {
		r := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{{Name: "init"}}, UndeclaredVariables: names}
		got, err := runnerapi.ParseResult(runnerapi.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.UndeclaredVariables) != runnerapi.MaxUndeclaredVariables || !got.UndeclaredTruncated {
			t.Fatalf("%d names (truncated %t), want %d and truncated", len(got.UndeclaredVariables), got.UndeclaredTruncated, runnerapi.MaxUndeclaredVariables)
		}
		if got.UndeclaredVariables[0] != "var_00" || got.UndeclaredVariables[19] != "var_19" {
			t.Fatalf("names = %v, want the first ones in order", got.UndeclaredVariables)
		}
		if n := got.UndeclaredVariables[1]; len(n) > runnerapi.MaxVariableNameBytes || !utf8.ValidString(n) || !strings.HasPrefix(long, n) {
			t.Fatalf("long name kept as %d bytes (valid UTF-8: %t)", len(n), utf8.ValidString(n))
		}
		if names[1] != long || len(names) != 30 {
			t.Fatal("Encode changed its argument")
		}
	})

	t.Run("a few names fit untouched", func(t *testing.T) {
		r := runnerapi.Result{Operation: "Plan", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, UndeclaredVariables: []string{"a", "b"}}
		got, err := runnerapi.ParseResult(runnerapi.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got.UndeclaredVariables, ",") != "a,b" || got.UndeclaredTruncated {
			t.Fatalf("got %v (truncated %t)", got.UndeclaredVariables, got.UndeclaredTruncated)
		}
	})

	t.Run("dropped from the end before the error is cut", func(t *testing.T) {
		var many []string
		for i := range runnerapi.MaxUndeclaredVariables {
			many = append(many, fmt.Sprintf("%03d_%s", i, strings.Repeat("v", runnerapi.MaxVariableNameBytes-4)))
		}
		r := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{{Name: "init"}, {Name: "apply", ExitCode: 1}},
			UndeclaredVariables: many, Error: strings.Repeat("e", 2500) + "END"}
		b := runnerapi.Encode(r)
		if len(b) > runnerapi.MaxResultBytes {
			t.Fatalf("%d bytes", len(b))
		}
		got, err := runnerapi.ParseResult(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Error != r.Error {
			t.Fatalf("the error was cut (%d of %d bytes) while names could go", len(got.Error), len(r.Error))
		}
		if n := len(got.UndeclaredVariables); n == 0 || n >= len(many) || !got.UndeclaredTruncated || got.UndeclaredVariables[0] != many[0] {
			t.Fatalf("%d names kept (truncated %t), want some dropped from the end", n, got.UndeclaredTruncated)
		}
	})

	t.Run("all dropped, then the error is cut", func(t *testing.T) {
		r := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{{Name: "init"}},
			UndeclaredVariables: names, Error: strings.Repeat("e", 5000) + "END"}
		b := runnerapi.Encode(r)
		got, err := runnerapi.ParseResult(b)
		if err != nil || len(b) > runnerapi.MaxResultBytes {
			t.Fatalf("%v, %d bytes", err, len(b))
		}
		if len(got.UndeclaredVariables) != 0 || !got.UndeclaredTruncated || !strings.HasSuffix(got.Error, "END") || !strings.HasPrefix(got.Error, runnerapi.TruncatedMarker) {
			t.Fatalf("names %v (truncated %t), error %q...", got.UndeclaredVariables, got.UndeclaredTruncated, got.Error[:20])
		}
	})
}
