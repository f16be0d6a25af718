package runner

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// stepShape is what a test checks of a Step besides its arguments.
type stepShape struct {
	name                                           string
	detailedExitCode, capture, internal, savedPlan bool
}

func shapeOf(steps []Step) []stepShape {
	var out []stepShape
	for _, st := range steps {
		out = append(out, stepShape{st.Name, st.DetailedExitCode, st.Capture, st.Internal, st.SavedPlan})
	}
	return out
}

func TestStepsOfARefreshAndARefreshOnlyPlan(t *testing.T) {
	base := StepOptions{VarFile: "IN/variables.tfvars.json", LockTimeout: 42 * time.Second, PlanFile: "W/plan.tfplan"}
	lock, vars := "-lock-timeout=42s", "-var-file=IN/variables.tfvars.json"
	refreshPlan := []string{"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, "-out=W/plan.tfplan"}
	applyFile := []string{"apply", "-input=false", "-no-color", lock, "W/plan.tfplan"}
	init := stepShape{name: StepInit}
	cases := []struct {
		name  string
		op    string
		opts  func(*StepOptions)
		shape []stepShape
		// args of the steps by name (internal steps have none).
		args map[string][]string
	}{
		{
			name: "Refresh: a refresh-only plan, read back, then applied from the file this run made",
			op:   runnerapi.OperationRefresh, opts: func(*StepOptions) {},
			shape: []stepShape{init, {name: StepRefresh, detailedExitCode: true}, {name: StepShowJSON, capture: true}, {name: StepApply}},
			args:  map[string][]string{StepRefresh: refreshPlan, StepShowJSON: {"show", "-json", "W/plan.tfplan"}, StepApply: applyFile},
		},
		{
			name: "Refresh through the channel saves no plan",
			op:   runnerapi.OperationRefresh, opts: func(o *StepOptions) { o.SavePlan = true },
			shape: []stepShape{init, {name: StepRefresh, detailedExitCode: true}, {name: StepShowJSON, capture: true}, {name: StepApply}},
			args:  map[string][]string{StepRefresh: refreshPlan, StepApply: applyFile},
		},
		{
			name: "Refresh of a saved plan: fetched, then applied as an Apply applies a saved plan",
			op:   runnerapi.OperationRefresh, opts: func(o *StepOptions) { o.ApplySavedPlan, o.SavePlan = true, true },
			shape: []stepShape{init, {name: StepFetchPlan, internal: true}, {name: StepApply, savedPlan: true}},
			args:  map[string][]string{StepApply: applyFile},
		},
		{
			name: "refresh-only Plan through the channel: saved for a Refresh to apply",
			op:   runnerapi.OperationPlan, opts: func(o *StepOptions) { o.RefreshOnly, o.SavePlan = true, true },
			shape: []stepShape{init, {name: StepPlan, detailedExitCode: true}, {name: StepShowJSON, capture: true}, {name: StepShow, capture: true},
				{name: StepSavePlan, internal: true}},
			args: map[string][]string{StepPlan: refreshPlan, StepShow: {"show", "-no-color", "W/plan.tfplan"}},
		},
		{
			name: "Drift check of mode Accept: a refresh-only plan, read back, nothing applied",
			op:   runnerapi.OperationDrift, opts: func(o *StepOptions) { o.RefreshOnly, o.SavePlan = true, true },
			shape: []stepShape{init, {name: StepPlan, detailedExitCode: true}, {name: StepShowJSON, capture: true}},
			args:  map[string][]string{StepPlan: refreshPlan},
		},
		{
			name: "destroy Plan through the channel: plan -destroy, saved for a Destroy to apply",
			op:   runnerapi.OperationPlan, opts: func(o *StepOptions) { o.DestroyPlan, o.SavePlan = true, true },
			shape: []stepShape{init, {name: StepPlan, detailedExitCode: true}, {name: StepShowJSON, capture: true}, {name: StepShow, capture: true},
				{name: StepSavePlan, internal: true}},
			args: map[string][]string{StepPlan: {"plan", "-destroy", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, "-out=W/plan.tfplan"}},
		},
		{
			name: "Destroy of a saved destroy plan: fetched, then applied from that file, nothing planned afresh",
			op:   runnerapi.OperationDestroy, opts: func(o *StepOptions) { o.ApplySavedPlan, o.SavePlan = true, true },
			shape: []stepShape{init, {name: StepFetchPlan, internal: true}, {name: StepDestroy, savedPlan: true}},
			args:  map[string][]string{StepDestroy: applyFile},
		},
		{
			name: "Destroy without a saved plan: apply -destroy as before",
			op:   runnerapi.OperationDestroy, opts: func(o *StepOptions) { o.SavePlan = true },
			shape: []stepShape{init, {name: StepDestroy}},
			args:  map[string][]string{StepDestroy: {"apply", "-destroy", "-auto-approve", "-input=false", "-no-color", lock, vars}},
		},
		{
			name: "refresh-only Plan without the channel",
			op:   runnerapi.OperationPlan, opts: func(o *StepOptions) { o.RefreshOnly = true },
			shape: []stepShape{init, {name: StepPlan, detailedExitCode: true}, {name: StepShowJSON, capture: true}},
			args:  map[string][]string{StepPlan: refreshPlan},
		},
		{
			name: "Drift stays a full plan",
			op:   runnerapi.OperationDrift, opts: func(*StepOptions) {},
			shape: []stepShape{init, {name: StepPlan, detailedExitCode: true}, {name: StepShowJSON, capture: true}},
			args:  map[string][]string{StepPlan: {"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, "-out=W/plan.tfplan"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.opts(&o)
			steps, err := Steps(tc.op, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := shapeOf(steps); !slices.Equal(got, tc.shape) {
				t.Fatalf("steps %+v\nwant  %+v", got, tc.shape)
			}
			for _, st := range steps {
				if want, ok := tc.args[st.Name]; ok && !slices.Equal(st.Args, want) {
					t.Errorf("%s: %q\nwant %q", st.Name, st.Args, want)
				}
				if st.Internal && st.Args != nil {
					t.Errorf("internal step %s has arguments %q", st.Name, st.Args)
				}
			}
		})
	}
}

func TestRefreshOnlyIsForAPlanOrADriftCheck(t *testing.T) {
	cfg, err := parseRun([]string{"--operation=Plan", "--module-dir=m", "--" + runnerapi.FlagRefreshOnly + "=true"}, &strings.Builder{})
	if err != nil || !cfg.RefreshOnly {
		t.Fatalf("parse: %+v, %v", cfg, err)
	}
	// The flag as the controller writes it.
	args := runnerapi.Command("runner", runnerapi.Invocation{Operation: runnerapi.OperationPlan, ModuleDir: "m", RefreshOnly: true})[2:]
	if cfg, err = parseRun(args, &strings.Builder{}); err != nil || !cfg.RefreshOnly {
		t.Fatalf("parse %q: %+v, %v", args, cfg, err)
	}
	if cfg, err = parseRun([]string{"--operation=Plan"}, &strings.Builder{}); err != nil || cfg.RefreshOnly {
		t.Fatalf("parse without the flag: %+v, %v", cfg, err)
	}
	for _, op := range []string{runnerapi.OperationApply, runnerapi.OperationDestroy, runnerapi.OperationRefresh, runnerapi.OperationRestore} {
		t.Run(op, func(t *testing.T) {
			f := newFixture(t, op, nil)
			f.cfg.RefreshOnly = true
			res, code := f.run()
			if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed || len(f.calls()) != 0 {
				t.Fatalf("exit %d result %+v calls %q", code, res, argsOf(f.calls()))
			}
			if want := "--refresh-only is for a Plan or a Drift check, not a " + op; !strings.Contains(res.Error, want) {
				t.Fatalf("error %q, want %q", res.Error, want)
			}
		})
	}
}

// outputChange renders one output_changes entry of `show -json`.
func outputChange(name string, actions ...string) string {
	q := func(s string) string { return `"` + s + `"` }
	var as []string
	for _, a := range actions {
		as = append(as, q(a))
	}
	return q(name) + `:{"actions":[` + strings.Join(as, ",") + `],"before":"a","after":"b"}`
}

func showJSONWithOutputs(changes, drift, outputs []string) string {
	return `{"format_version":"1.2","resource_changes":[` + strings.Join(changes, ",") + `],"resource_drift":[` + strings.Join(drift, ",") +
		`],"output_changes":{` + strings.Join(outputs, ",") + `}}`
}

func TestSummarizeCountsOutputChangesOfARefreshOnlyPlan(t *testing.T) {
	doc := showJSONWithOutputs(
		[]string{change("terraform_data.planned", "update")},
		[]string{change("terraform_data.outside", "update"), change("terraform_data.gone", "delete")},
		[]string{outputChange("subnet", "update"), outputChange("new", "create"), outputChange("old", "delete"), outputChange("same", "no-op")})
	sum, err := Summarize([]byte(doc), true)
	if err != nil {
		t.Fatal(err)
	}
	want := runnerapi.PlanSummary{Create: 1, Update: 2, Delete: 2,
		Addresses: []string{"output.new", "output.old", "output.subnet", "terraform_data.gone", "terraform_data.outside"}}
	if got := sum.Bounded(runnerapi.MaxRecordAddresses); !summaryEqual(got, want) {
		t.Fatalf("refresh-only summary %+v\nwant %+v", got, want)
	}
	// A refresh-only plan whose only difference is an output (a data source read from outside
	// changed) is a change.
	sum, err = Summarize([]byte(showJSONWithOutputs(nil, nil, []string{outputChange("subnet", "update")})), true)
	if err != nil || sum.Changed() != 1 || !slices.Equal(sum.Addresses, []string{"output.subnet"}) {
		t.Fatalf("output-only refresh: %+v, %v", sum, err)
	}
	// A refresh-only plan with no difference counts nothing (terraform lists unchanged outputs
	// as no-op; a document without output_changes at all is fine).
	for _, d := range []string{showJSONWithOutputs(nil, nil, []string{outputChange("subnet", "no-op")}), `{"format_version":"1.2"}`} {
		if sum, err := Summarize([]byte(d), true); err != nil || sum.Changed() != 0 || len(sum.Addresses) != 0 {
			t.Fatalf("%s: %+v, %v", d, sum, err)
		}
	}
	// A full plan counts the resource changes an apply would make, not outputs.
	sum, err = Summarize([]byte(doc), false)
	if want := (runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.planned"}}); err != nil || !summaryEqual(sum, want) {
		t.Fatalf("full plan summary %+v, %v", sum, err)
	}
}

func TestRefreshAppliesTheRefreshOnlyPlanItMade(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRefresh, nil)
	// Through the channel: the endpoint fails the test if the refresh saves or fetches a plan.
	ep := newPlanEndpoint(t)
	ep.put = func(runnerapi.PlanUpload) (int, any) {
		t.Error("a refresh saved a plan")
		return http.StatusForbidden, "no"
	}
	ep.get = func() (int, any) { t.Error("a refresh fetched a plan"); return http.StatusForbidden, "no" }
	ep.attach(f)
	applied := filepath.Join(t.TempDir(), "applied")
	f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_APPLIED="+applied,
		"FAKE_TF_SHOW_JSON="+showJSONWithOutputs(nil, []string{change("terraform_data.outside", "update")}, []string{outputChange("subnet", "update")}))
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepRefresh, StepShowJSON, StepApply}) {
		t.Fatalf("steps %v", names)
	}
	if res.Changes == nil || !*res.Changes || res.Drift != nil {
		t.Fatalf("changes %v drift %v", deref(res.Changes), deref(res.Drift))
	}
	want := runnerapi.PlanSummary{Update: 2, Addresses: []string{"output.subnet", "terraform_data.outside"}}
	if res.Summary == nil || !summaryEqual(*res.Summary, want) {
		t.Fatalf("summary %+v, want %+v", res.Summary, want)
	}
	if res.SavedPlan != nil || res.AppliedPlan != nil || res.PlanStale {
		t.Fatalf("a refresh of its own plan reports no saved plan: %+v", res)
	}
	// The apply applied the plan file the refresh-only plan wrote in this run.
	if got, err := os.ReadFile(applied); err != nil || string(got) != fakePlanFile {
		t.Fatalf("applied %q (%v), want the plan this run made", got, err)
	}
	if len(ep.uploads) != 0 || ep.gets != 0 {
		t.Fatalf("%d uploads, %d fetches", len(ep.uploads), ep.gets)
	}

	t.Run("no changes: the plan is still applied", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationRefresh, nil)
		applied := filepath.Join(t.TempDir(), "applied")
		f.env("FAKE_TF_PLAN_EXIT=0", "FAKE_TF_APPLIED="+applied)
		res, code := f.run()
		if code != runnerapi.ExitOK || res.Changes == nil || *res.Changes || res.Summary == nil || res.Summary.Changed() != 0 {
			t.Fatalf("exit %d result %+v", code, res)
		}
		if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepRefresh, StepShowJSON, StepApply}) {
			t.Fatalf("steps %v", names)
		}
	})
	t.Run("a failed refresh-only plan is not applied", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationRefresh, nil)
		applied := filepath.Join(t.TempDir(), "applied")
		f.env("FAKE_TF_PLAN_EXIT=1", "FAKE_TF_APPLIED="+applied)
		res, code := f.run()
		if code != runnerapi.ExitTerraformFailed || !strings.HasPrefix(res.Error, "refresh exited with code 1") {
			t.Fatalf("exit %d result %+v", code, res)
		}
		if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepRefresh}) {
			t.Fatalf("steps %v", names)
		}
		if _, err := os.Stat(applied); err == nil {
			t.Fatal("applied a plan that failed")
		}
	})
	t.Run("a failed apply fails the refresh, and still reports what the plan found", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationRefresh, nil)
		f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: writing the state")
		res, code := f.run()
		if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed || !strings.HasPrefix(res.Error, "apply exited with code 1") {
			t.Fatalf("exit %d result %+v", code, res)
		}
		if res.Changes == nil || !*res.Changes || res.PlanStale {
			t.Fatalf("result %+v", res)
		}
	})
}

func TestRefreshOnlyPlanIsSavedThroughTheChannel(t *testing.T) {
	f := newFixture(t, runnerapi.OperationPlan, nil)
	f.cfg.RefreshOnly = true
	ep := newPlanEndpoint(t)
	ep.put = func(up runnerapi.PlanUpload) (int, any) {
		rec := planRecordOf(up.File, 7)
		rec.RefreshOnly = true // the channel records it from its own flag
		rec.PlanSummary = up.Summary
		return http.StatusOK, storedOf(rec)
	}
	ep.attach(f)
	f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_SHOW_JSON="+showJSONWithOutputs([]string{change("terraform_data.ignored", "update")}, nil, []string{outputChange("subnet", "update")}))
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	var planArgs []string
	for _, c := range f.calls() {
		if c.Args[0] == "plan" {
			planArgs = c.Args
		}
		if c.Args[0] == "apply" {
			t.Fatalf("a plan applied: %q", c.Args)
		}
	}
	if !slices.Contains(planArgs, "-refresh-only") {
		t.Fatalf("plan %q", planArgs)
	}
	if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepPlan, StepShowJSON, StepShow}) {
		t.Fatalf("steps %v", names)
	}
	want := runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.subnet"}}
	if len(ep.uploads) != 1 || !summaryEqual(ep.uploads[0].Summary, want) {
		t.Fatalf("uploads %+v", ep.uploads)
	}
	if res.Summary == nil || !summaryEqual(*res.Summary, want) || res.Changes == nil || !*res.Changes || res.Drift != nil {
		t.Fatalf("result %+v", res)
	}
	if res.SavedPlan == nil || !reflect.DeepEqual(*res.SavedPlan, savedRefOf(planRecordOf([]byte(fakePlanFile), 7))) {
		t.Fatalf("saved plan %+v", res.SavedPlan)
	}
}

// refreshOnlyRecordOf is a consistent record of a refresh-only plan file.
func refreshOnlyRecordOf(file []byte, serial uint64) runnerapi.PlanRecord {
	rec := planRecordOf(file, serial)
	rec.RefreshOnly = true
	return rec
}

func destroyRecordOf(file []byte, serial uint64) runnerapi.PlanRecord {
	rec := planRecordOf(file, serial)
	rec.Destroy = true
	return rec
}

func TestRefreshOfASavedPlanAppliesExactlyThatFile(t *testing.T) {
	file := []byte("PK\x03\x04 the approved refresh-only plan")
	rec := refreshOnlyRecordOf(file, 3)
	f, ep, applied := savedPlanFixture(t, rec.ID, func() (int, any) {
		return http.StatusOK, runnerapi.PlanDownload{Record: rec, File: file}
	})
	f.cfg.Operation = runnerapi.OperationRefresh
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if res.AppliedPlan == nil || *res.AppliedPlan != rec.Ref() || res.PlanStale || res.PlanRefused != "" {
		t.Fatalf("result %+v", res)
	}
	if got, err := os.ReadFile(applied); err != nil || string(got) != string(file) {
		t.Fatalf("applied %q (%v), want the fetched file", got, err)
	}
	var args []string
	for _, a := range argsOf(f.calls()) {
		args = append(args, strings.ReplaceAll(a, f.cfg.WorkDir, "WORK"))
	}
	want := []string{"init -input=false -no-color -reconfigure", "apply -input=false -no-color -lock-timeout=42s WORK/plan.tfplan"}
	if !slices.Equal(args, want) {
		t.Fatalf("commands %q\nwant %q", args, want)
	}
	if ep.gets != 1 {
		t.Fatalf("%d fetches", ep.gets)
	}
	if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepApply}) {
		t.Fatalf("steps %v", names)
	}

	t.Run("stale", func(t *testing.T) {
		f, _, _ := savedPlanFixture(t, rec.ID, func() (int, any) { return http.StatusOK, runnerapi.PlanDownload{Record: rec, File: file} })
		f.cfg.Operation = runnerapi.OperationRefresh
		f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: Saved plan is stale")
		res, code := f.run()
		if code != runnerapi.ExitPlanRefused || !res.PlanStale || res.AppliedPlan != nil {
			t.Fatalf("exit %d result %+v", code, res)
		}
	})
}

// The runner's own check of the kind of plan the channel handed out: a Refresh applies only a
// refresh-only plan, a Destroy only a destroy plan, an Apply only a plan that is neither. None
// applies anything.
func TestSavedPlanOfTheOtherKindIsRefused(t *testing.T) {
	file := []byte("PK\x03\x04 an approved plan")
	cases := map[string]struct {
		op   string
		rec  runnerapi.PlanRecord
		want string
	}{
		"an Apply given a refresh-only plan":  {runnerapi.OperationApply, refreshOnlyRecordOf(file, 3), "is a refresh-only plan, which only a Refresh Job applies"},
		"a Refresh given an apply plan":       {runnerapi.OperationRefresh, planRecordOf(file, 3), "is an apply plan, which only an Apply Job applies; a Refresh Job applies only a refresh-only plan"},
		"an Apply given a destroy plan":       {runnerapi.OperationApply, destroyRecordOf(file, 3), "is a destroy plan, which only a Destroy Job applies; an Apply Job applies only an apply plan"},
		"a Destroy given an apply plan":       {runnerapi.OperationDestroy, planRecordOf(file, 3), "is an apply plan, which only an Apply Job applies; a Destroy Job applies only a destroy plan"},
		"a Refresh given a destroy plan":      {runnerapi.OperationRefresh, destroyRecordOf(file, 3), "is a destroy plan"},
		"a Destroy given a refresh-only plan": {runnerapi.OperationDestroy, refreshOnlyRecordOf(file, 3), "is a refresh-only plan"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, _, applied := savedPlanFixture(t, tc.rec.ID, func() (int, any) {
				return http.StatusOK, runnerapi.PlanDownload{Record: tc.rec, File: file}
			})
			f.cfg.Operation = tc.op
			res, code := f.run()
			if code != runnerapi.ExitPlanRefused || res.Outcome != runnerapi.OutcomeFailed || res.PlanRefused != runnerapi.PlanRefusedKind || res.AppliedPlan != nil {
				t.Fatalf("exit %d result %+v", code, res)
			}
			if !strings.Contains(res.Error, tc.want) {
				t.Fatalf("error %q, want %q", res.Error, tc.want)
			}
			if _, err := os.Stat(applied); err == nil {
				t.Fatal("a plan of the other kind was applied")
			}
			if got := argsOf(f.calls()); len(got) != 1 {
				t.Fatalf("commands after a refused plan: %q", got)
			}
		})
	}
	// The channel's own refusal of the kind is reported as such.
	f, _, applied := savedPlanFixture(t, runnerapi.PlanID("a", "b", 1, "c"), func() (int, any) {
		return http.StatusConflict, runnerapi.PlanRefusal{Reason: runnerapi.PlanRefusedKind, Message: "plan x is a refresh-only plan"}
	})
	res, code := f.run()
	if code != runnerapi.ExitPlanRefused || res.PlanRefused != runnerapi.PlanRefusedKind || !strings.Contains(res.Error, "plan x is a refresh-only plan") {
		t.Fatalf("channel refusal: exit %d result %+v", code, res)
	}
	if _, err := os.Stat(applied); err == nil {
		t.Fatal("a refused plan was applied")
	}
}

// The drift check of mode Accept runs a refresh-only plan: it reports drift (what changed
// outside terraform, resources and outputs) and applies nothing.
func TestAcceptDriftCheckIsARefreshOnlyPlan(t *testing.T) {
	f := newFixture(t, runnerapi.OperationDrift, nil)
	f.cfg.RefreshOnly = true
	applied := filepath.Join(t.TempDir(), "applied")
	f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_APPLIED="+applied,
		"FAKE_TF_SHOW_JSON="+showJSONWithOutputs([]string{change("terraform_data.config", "update")}, nil, []string{outputChange("subnet", "update")}))
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if names := stepNamesOf(res); !slices.Equal(names, []string{StepInit, StepPlan, StepShowJSON}) {
		t.Fatalf("steps %v", names)
	}
	if args := f.calls()[1].Args; !slices.Contains(args, "-refresh-only") {
		t.Fatalf("the check's plan %q is not refresh-only", args)
	}
	if res.Drift == nil || !*res.Drift || res.Changes != nil {
		t.Fatalf("drift %v changes %v", deref(res.Drift), deref(res.Changes))
	}
	// What changed outside terraform, not what an apply of the configuration would change.
	want := runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.subnet"}}
	if res.Summary == nil || !summaryEqual(*res.Summary, want) {
		t.Fatalf("summary %+v, want %+v", res.Summary, want)
	}
	if _, err := os.Stat(applied); !os.IsNotExist(err) {
		t.Fatalf("a drift check applied something (%v)", err)
	}
}

// TestParseRunReadsBackTheInvocation: the runner parses the command runnerapi.Command writes into
// the same Invocation, field for field (one shape on both sides of the Job's command line).
func TestParseRunReadsBackTheInvocation(t *testing.T) {
	inv := runnerapi.Invocation{Operation: runnerapi.OperationApply, ModuleDir: "/m", InputsDir: "/i", WorkDir: "/w",
		ResultFile: "/r", LockTimeout: 7 * time.Second, Binary: "tofu", ChannelDir: "/c", PlanID: "p1", Target: "replace terraform_data.a"}
	cfg, err := parseRun(runnerapi.Command("runner", inv)[2:], &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Invocation != inv {
		t.Fatalf("parsed %+v, want %+v", cfg.Invocation, inv)
	}
}
