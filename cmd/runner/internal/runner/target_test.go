package runner

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func mustTarget(t *testing.T, s string) runnerapi.Target {
	t.Helper()
	target, err := runnerapi.ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// Steps adds a replace's -replace to the commands that plan (an Apply's apply, a Plan's plan),
// and to nothing else: an apply of a saved plan takes the replace from its file, a refresh-only
// or a destroy plan takes no target, and an import changes no command (its block is a file).
func TestStepsOfATargetedOperation(t *testing.T) {
	replace := mustTarget(t, "replace module.net.terraform_data.a[0]")
	imp := mustTarget(t, "import terraform_data.a some-id")
	base := StepOptions{VarFile: "IN/variables.tfvars.json", LockTimeout: 42 * time.Second, PlanFile: "W/plan.tfplan"}
	lock, vars, out := "-lock-timeout=42s", "-var-file=IN/variables.tfvars.json", "-out=W/plan.tfplan"
	flag := "-replace=module.net.terraform_data.a[0]"
	applyFile := []string{"apply", "-input=false", "-no-color", lock, "W/plan.tfplan"}
	cases := []struct {
		name string
		op   string
		opts func(*StepOptions)
		// args of the steps by name.
		args map[string][]string
	}{
		{
			name: "Apply with a replace", op: runnerapi.OperationApply,
			opts: func(o *StepOptions) { o.Target = replace },
			args: map[string][]string{StepApply: {"apply", "-auto-approve", "-input=false", "-no-color", lock, flag, vars}},
		},
		{
			name: "Plan through the channel with a replace", op: runnerapi.OperationPlan,
			opts: func(o *StepOptions) { o.Target, o.SavePlan = replace, true },
			args: map[string][]string{StepPlan: {"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, flag, vars, out}},
		},
		{
			name: "Apply of a saved plan: the plan file carries the replace", op: runnerapi.OperationApply,
			opts: func(o *StepOptions) { o.Target, o.ApplySavedPlan, o.SavePlan = replace, true, true },
			args: map[string][]string{StepApply: applyFile},
		},
		{
			name: "refresh-only Plan: no target", op: runnerapi.OperationPlan,
			opts: func(o *StepOptions) { o.Target, o.RefreshOnly = replace, true },
			args: map[string][]string{StepPlan: {"plan", "-refresh-only", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, out}},
		},
		{
			name: "destroy Plan: no target", op: runnerapi.OperationPlan,
			opts: func(o *StepOptions) { o.Target, o.DestroyPlan = replace, true },
			args: map[string][]string{StepPlan: {"plan", "-destroy", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, out}},
		},
		{
			name: "Apply with an import: the commands of a plain Apply", op: runnerapi.OperationApply,
			opts: func(o *StepOptions) { o.Target = imp },
			args: map[string][]string{StepApply: {"apply", "-auto-approve", "-input=false", "-no-color", lock, vars}},
		},
		{
			name: "Plan with an import: the commands of a plain Plan", op: runnerapi.OperationPlan,
			opts: func(o *StepOptions) { o.Target = imp },
			args: map[string][]string{StepPlan: {"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, out}},
		},
		{
			name: "Plan without a target", op: runnerapi.OperationPlan,
			opts: func(*StepOptions) {},
			args: map[string][]string{StepPlan: {"plan", "-detailed-exitcode", "-input=false", "-no-color", lock, vars, out}},
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
			seen := 0
			for _, st := range steps {
				if want, ok := tc.args[st.Name]; ok {
					seen++
					if !slices.Equal(st.Args, want) {
						t.Errorf("%s: %q\nwant %q", st.Name, st.Args, want)
					}
				}
			}
			if seen != len(tc.args) {
				t.Fatalf("steps %+v lack one of %v", shapeOf(steps), tc.args)
			}
		})
	}
	// No other operation's commands carry a replace, whatever the options say, nor an apply of
	// a saved plan.
	for _, op := range runnerapi.Operations {
		for _, saved := range []bool{false, true} {
			o := base
			o.Target, o.ApplySavedPlan, o.PushFile = replace, saved, "W/push.tfstate"
			steps, err := Steps(op, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				has := slices.Contains(st.Args, flag)
				// ApplySavedPlan means nothing to a Plan.
				want := (op == runnerapi.OperationApply && st.Name == StepApply && !saved) || (op == runnerapi.OperationPlan && st.Name == StepPlan)
				if has != want {
					t.Errorf("%s (saved plan %t) %s: %q", op, saved, st.Name, st.Args)
				}
			}
		}
	}
}

// A replace reaches terraform's apply and plan as -replace.
func TestTargetedReplaceReachesTerraform(t *testing.T) {
	for op, step := range map[string]string{runnerapi.OperationApply: "apply", runnerapi.OperationPlan: "plan"} {
		t.Run(op, func(t *testing.T) {
			f := newFixture(t, op, nil)
			f.cfg.Target = "replace terraform_data.x"
			res, code := f.run()
			if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
				t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
			}
			found := false
			for _, c := range f.calls() {
				if c.Args[0] == step {
					found = slices.Contains(c.Args, "-replace=terraform_data.x")
				}
			}
			if !found {
				t.Fatalf("no %s with -replace: %q", step, argsOf(f.calls()))
			}
			if _, err := os.Stat(filepath.Join(f.cfg.WorkDir, "module", runnerapi.TargetBlockFile)); !os.IsNotExist(err) {
				t.Fatalf("a replace wrote an import block (%v)", err)
			}
		})
	}
}

// runBlockTarget runs target (an import or a forget) as an Apply, a Plan and an apply of a saved
// plan, and checks for each that it succeeded, that every command ran in the module copy (never
// the module folder, which may be read-only, and which stays unwritten) without -replace; then
// it hands the block file terraform found to check.
func runBlockTarget(t *testing.T, target string, check func(t *testing.T, block []byte)) {
	t.Helper()
	savedFile := []byte("PK\x03\x04 the approved targeted plan")
	rec := planRecordOf(savedFile, 3)
	fixtures := map[string]func(t *testing.T) *fixture{
		"Apply": func(t *testing.T) *fixture { return newFixture(t, runnerapi.OperationApply, nil) },
		"Plan":  func(t *testing.T) *fixture { return newFixture(t, runnerapi.OperationPlan, nil) },
		"Apply of a saved plan": func(t *testing.T) *fixture {
			f, _, _ := savedPlanFixture(t, rec.ID, func() (int, any) { return http.StatusOK, runnerapi.PlanDownload{Record: rec, File: savedFile} })
			return f
		},
	}
	for name, newF := range fixtures {
		t.Run(name, func(t *testing.T) {
			f := newF(t)
			f.cfg.Target = target
			res, code := f.run()
			if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
				t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
			}
			calls := f.calls()
			if len(calls) < 2 {
				t.Fatalf("calls %q", argsOf(calls))
			}
			for _, c := range calls {
				if c.Dir != filepath.Join(f.cfg.WorkDir, "module") {
					t.Fatalf("%q ran in %s, not the module copy", c.Args, c.Dir)
				}
				if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "-replace") }) {
					t.Fatalf("%s passed %q", target, c.Args)
				}
			}
			b, err := os.ReadFile(filepath.Join(calls[0].Dir, runnerapi.TargetBlockFile))
			if err != nil {
				t.Fatalf("no block where terraform runs: %v", err)
			}
			check(t, b)
			if _, err := os.Stat(filepath.Join(f.cfg.ModuleDir, runnerapi.TargetBlockFile)); !os.IsNotExist(err) {
				t.Fatalf("the module folder was written to (%v)", err)
			}
		})
	}
}

// An import writes its import block, the ID escaped to stay literal, into the module copy
// terraform runs in, for an Apply, a Plan and an apply of a saved plan alike.
func TestTargetedImportWritesItsImportBlockIntoTheModuleCopy(t *testing.T) {
	const id = `arn:aws:x:${var.name}:%{ if true }y %{ endif }`
	const escaped = `arn:aws:x:$${var.name}:%%{ if true }y %%{ endif }`
	runBlockTarget(t, "import module.net.terraform_data.a[\"k\"] "+id, func(t *testing.T, b []byte) {
		var doc struct {
			Import []struct {
				To string `json:"to"`
				ID string `json:"id"`
			} `json:"import"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Import) != 1 {
			t.Fatalf("import block %s (%v)", b, err)
		}
		if to, got := doc.Import[0].To, doc.Import[0].ID; to != `module.net.terraform_data.a["k"]` || got != escaped {
			t.Fatalf("import to %q id %q, want id %q", to, got, escaped)
		}
	})
}

// A forget writes its removed block (the objects kept) into the module copy terraform runs in,
// for an Apply, a Plan and an apply of a saved plan alike.
func TestTargetedForgetWritesItsRemovedBlockIntoTheModuleCopy(t *testing.T) {
	runBlockTarget(t, "forget module.net.terraform_data.old", func(t *testing.T, b []byte) {
		var doc struct {
			Removed []struct {
				From      string          `json:"from"`
				Lifecycle map[string]bool `json:"lifecycle"`
			} `json:"removed"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Removed) != 1 || doc.Removed[0].From != "module.net.terraform_data.old" ||
			doc.Removed[0].Lifecycle["destroy"] || len(doc.Removed[0].Lifecycle) != 1 {
			t.Fatalf("removed block %s (%v)", b, err)
		}
	})
}

// A module that ships a file of the targeted block's name is refused for an import or a forget
// (the runner would overwrite it, or terraform would read a second block); nothing runs.
func TestTargetedImportAndForgetRefuseAModuleWithTheBlockFile(t *testing.T) {
	for _, op := range []string{runnerapi.OperationApply, runnerapi.OperationPlan} {
		for _, target := range []string{"import terraform_data.x the-id", "forget terraform_data.x"} {
			t.Run(op+" "+target, func(t *testing.T) {
				f := newFixture(t, op, nil)
				write(t, filepath.Join(f.cfg.ModuleDir, runnerapi.TargetBlockFile), `{"import":[{"to":"terraform_data.x","id":"mine"}]}`)
				f.cfg.Target = target
				res, code := f.run()
				if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed || len(f.calls()) != 0 {
					t.Fatalf("exit %d result %+v calls %q", code, res, argsOf(f.calls()))
				}
				if !strings.Contains(res.Error, "the module has a file "+runnerapi.TargetBlockFile) {
					t.Fatalf("error %q", res.Error)
				}
			})
		}
	}
	t.Run("a replace leaves the module's file alone", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationApply, nil)
		write(t, filepath.Join(f.cfg.ModuleDir, runnerapi.TargetBlockFile), `{}`)
		f.cfg.Target = "replace terraform_data.x"
		if res, code := f.run(); code != runnerapi.ExitOK {
			t.Fatalf("exit %d result %+v", code, res)
		}
	})
}

// --target is bad input when runnerapi.ParseTarget refuses it, and on any run but an Apply or a
// Plan that is neither refresh-only nor a destroy plan; nothing runs.
func TestTargetIsForAnApplyOrAPlan(t *testing.T) {
	cases := []struct {
		name, op, target string
		mutate           func(*fixture)
		want             string
	}{
		{name: "unknown operation", op: runnerapi.OperationApply, target: "taint terraform_data.x", want: `unknown operation "taint"`},
		{name: "replace without an address", op: runnerapi.OperationPlan, target: "replace", want: `want "replace <address>"`},
		{name: "import without an ID", op: runnerapi.OperationApply, target: "import terraform_data.x", want: `want "import <address> <id>"`},
		{name: "not an address", op: runnerapi.OperationApply, target: "replace x", want: `"x" is not a managed resource instance address`},
		{name: "blank", op: runnerapi.OperationApply, target: "   ", want: "empty"},
		{name: "Destroy", op: runnerapi.OperationDestroy, target: "replace terraform_data.x", want: "--target is for an Apply or a Plan, not a Destroy"},
		{name: "Refresh", op: runnerapi.OperationRefresh, target: "replace terraform_data.x", want: "--target is for an Apply or a Plan, not a Refresh"},
		{name: "Drift", op: runnerapi.OperationDrift, target: "replace terraform_data.x", want: "--target is for an Apply or a Plan, not a Drift"},
		{name: "Restore", op: runnerapi.OperationRestore, target: "import terraform_data.x id", want: "--target is for an Apply or a Plan, not a Restore"},
		{name: "refresh-only Plan", op: runnerapi.OperationPlan, target: "replace terraform_data.x", mutate: func(f *fixture) { f.cfg.RefreshOnly = true },
			want: "neither refresh-only nor a destroy plan"},
		{name: "destroy Plan", op: runnerapi.OperationPlan, target: "replace terraform_data.x", mutate: func(f *fixture) { f.cfg.DestroyPlan = true },
			want: "neither refresh-only nor a destroy plan"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.op, nil)
			f.cfg.Target = tc.target
			if tc.mutate != nil {
				tc.mutate(f)
			}
			res, code := f.run()
			if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed || len(f.calls()) != 0 {
				t.Fatalf("exit %d result %+v calls %q", code, res, argsOf(f.calls()))
			}
			if !strings.Contains(res.Error, tc.want) {
				t.Fatalf("error %q, want %q", res.Error, tc.want)
			}
		})
	}
}

// The runner reads --target as runnerapi.Command writes it: one argument, blanks included.
func TestParseRunReadsTheTarget(t *testing.T) {
	inv := runnerapi.Invocation{Operation: runnerapi.OperationPlan, ModuleDir: "/m", Target: `import terraform_data.a some id with blanks`}
	cfg, err := parseRun(runnerapi.Command("runner", inv)[2:], &strings.Builder{})
	if err != nil || cfg.Target != inv.Target {
		t.Fatalf("parsed %+v, %v", cfg.Invocation, err)
	}
}
