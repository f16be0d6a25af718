package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func TestArgsPerOperation(t *testing.T) {
	lock, vars := "-lock-timeout=42s", "-var-file=INPUTS/variables.tfvars.json"
	init := "init -input=false -no-color -reconfigure"
	cases := []struct {
		op          string
		refreshOnly bool
		want        []string
	}{
		{runnerapi.OperationApply, false, []string{init, "apply -auto-approve -input=false -no-color " + lock + " " + vars}},
		{runnerapi.OperationDestroy, false, []string{init, "apply -destroy -auto-approve -input=false -no-color " + lock + " " + vars}},
		{runnerapi.OperationPlan, false, []string{init, "plan -detailed-exitcode -input=false -no-color " + lock + " " + vars + " -out=WORK/plan.tfplan", "show -json WORK/plan.tfplan"}},
		{runnerapi.OperationPlan, true, []string{init, "plan -refresh-only -detailed-exitcode -input=false -no-color " + lock + " " + vars + " -out=WORK/plan.tfplan", "show -json WORK/plan.tfplan"}},
		// A refresh applies the refresh-only plan it just made: no -var-file (the plan file
		// carries the variables) and no -auto-approve (a saved plan never asks).
		{runnerapi.OperationRefresh, false, []string{init, "plan -refresh-only -detailed-exitcode -input=false -no-color " + lock + " " + vars + " -out=WORK/plan.tfplan",
			"show -json WORK/plan.tfplan", "apply -input=false -no-color " + lock + " WORK/plan.tfplan"}},
		{runnerapi.OperationDrift, false, []string{init, "plan -detailed-exitcode -input=false -no-color " + lock + " " + vars + " -out=WORK/plan.tfplan", "show -json WORK/plan.tfplan"}},
		{runnerapi.OperationRestore, false, []string{init, "state pull", "state push " + lock + " WORK/restore.tfstate"}},
	}
	for _, tc := range cases {
		name := tc.op
		if tc.refreshOnly {
			name += "-refresh-only"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.op, nil)
			f.cfg.RefreshOnly = tc.refreshOnly
			if tc.op == runnerapi.OperationRestore {
				write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), `{"version":4,"lineage":"l1","serial":3,"resources":[],"outputs":{}}`)
				current := filepath.Join(t.TempDir(), "current")
				write(t, current, `{"version":4,"lineage":"l0","serial":1,"resources":[],"outputs":{}}`)
				f.env("FAKE_TF_PULL="+current, "FAKE_TF_PUSHED="+filepath.Join(t.TempDir(), "pushed"))
			}
			res, code := f.run()
			if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
				t.Fatalf("exit %d, result %+v\n%s", code, res, f.out)
			}
			var got []string
			for _, a := range argsOf(f.calls()) {
				a = strings.ReplaceAll(a, f.cfg.InputsDir, "INPUTS")
				got = append(got, strings.ReplaceAll(a, f.cfg.WorkDir, "WORK"))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("commands:\n got %q\nwant %q", got, tc.want)
			}
			for _, c := range f.calls() {
				if c.Dir != filepath.Join(f.cfg.WorkDir, "module") {
					t.Fatalf("%v ran in %s, not in the module copy", c.Args, c.Dir)
				}
			}
			var names []string
			for _, s := range res.Steps {
				names = append(names, s.Name)
			}
			if len(names) != len(tc.want) {
				t.Fatalf("steps %v", names)
			}
		})
	}
}

func TestPlanChangesAndDriftAreNotFailures(t *testing.T) {
	cases := []struct {
		op          string
		refreshOnly bool
		planExit    string
		wantCode    int
		wantOut     runnerapi.Outcome
		changes     *bool
		drift       *bool
		wantError   bool
	}{
		{runnerapi.OperationPlan, false, "0", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(false), nil, false},
		{runnerapi.OperationPlan, false, "2", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(true), nil, false},
		{runnerapi.OperationPlan, false, "1", runnerapi.ExitTerraformFailed, runnerapi.OutcomeFailed, nil, nil, true},
		{runnerapi.OperationDrift, false, "0", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, nil, ptrTo(false), false},
		{runnerapi.OperationDrift, false, "2", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, nil, ptrTo(true), false},
		{runnerapi.OperationDrift, false, "1", runnerapi.ExitTerraformFailed, runnerapi.OutcomeFailed, nil, nil, true},
		{runnerapi.OperationRefresh, false, "0", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(false), nil, false},
		{runnerapi.OperationRefresh, false, "2", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(true), nil, false},
		{runnerapi.OperationRefresh, false, "1", runnerapi.ExitTerraformFailed, runnerapi.OutcomeFailed, nil, nil, true},
		{runnerapi.OperationPlan, true, "0", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(false), nil, false},
		{runnerapi.OperationPlan, true, "2", runnerapi.ExitOK, runnerapi.OutcomeSucceeded, ptrTo(true), nil, false},
		{runnerapi.OperationPlan, true, "1", runnerapi.ExitTerraformFailed, runnerapi.OutcomeFailed, nil, nil, true},
	}
	for _, tc := range cases {
		name := tc.op
		if tc.refreshOnly {
			name += "-refresh-only"
		}
		t.Run(name+"-exit-"+tc.planExit, func(t *testing.T) {
			f := newFixture(t, tc.op, nil)
			f.cfg.RefreshOnly = tc.refreshOnly
			f.env("FAKE_TF_PLAN_EXIT=" + tc.planExit)
			res, code := f.run()
			if code != tc.wantCode || res.Outcome != tc.wantOut {
				t.Fatalf("exit %d outcome %s, want %d %s", code, res.Outcome, tc.wantCode, tc.wantOut)
			}
			if !eqPtr(res.Changes, tc.changes) || !eqPtr(res.Drift, tc.drift) {
				t.Fatalf("changes %v drift %v, want %v %v", deref(res.Changes), deref(res.Drift), deref(tc.changes), deref(tc.drift))
			}
			if (res.Error != "") != tc.wantError {
				t.Fatalf("error %q", res.Error)
			}
		})
	}
}

func TestFailureIsRedactedEverywhere(t *testing.T) {
	secret := "s3cr3t-Value-42"
	multi := "first-line-of-key\nsecond-line-of-key"
	quoted := `pa"ss\word-9`
	stderr := strings.Join([]string{
		"Error: creating instance: auth failed for " + secret,
		`  with var.quoted = "pa\"ss\\word-9"`,
		"  second-line-of-key leaked on its own",
		"-----BEGIN RSA PRIVATE KEY-----",
		"MIIEowIBAAKCAQEAsecretkeymaterial",
		"-----END RSA PRIVATE KEY-----",
		"  password = hunter2hunter2",
		"  Authorization: Bearer abcdefghijklmnop.qrstuv",
		"  https://admin:topsecretpw@example.com/api",
		"Error: the last line",
	}, "\n")
	f := newFixture(t, runnerapi.OperationApply, []string{secret, multi, quoted, "abc"})
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR="+stderr, "FAKE_TF_STDOUT=plan shows "+secret+" on stdout")
	res, code := f.run()
	if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed {
		t.Fatalf("exit %d, result %+v", code, res)
	}
	resultFile, _ := os.ReadFile(f.cfg.ResultFile)
	for where, text := range map[string]string{"result error": res.Error, "result file": string(resultFile), "stdout": f.out.String()} {
		for _, leak := range []string{secret, "second-line-of-key", `pa\"ss\\word-9`, "secretkeymaterial", "hunter2hunter2", "abcdefghijklmnop", "topsecretpw"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s leaks %q:\n%s", where, leak, text)
			}
		}
	}
	if !strings.Contains(res.Error, "Error: the last line") || !strings.Contains(res.Error, Mask) {
		t.Errorf("error lacks the tail or the mask:\n%s", res.Error)
	}
	if !strings.HasPrefix(res.Error, "apply exited with code 1") {
		t.Errorf("error does not name the step: %q", res.Error)
	}
}

// TestRegistryTokenIsRedacted: a registry token that reaches terraform as TF_TOKEN_<host>
// (spec.job.cliConfig.credentials) is masked wherever the runner reports a module that prints
// it (the pod's log, the result's error that becomes status.lastRun.message and the JobFailed
// event), even when redact.json does not list it.
func TestRegistryTokenIsRedacted(t *testing.T) {
	token := "tok3n-Value-of-the-registry"
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("TF_TOKEN_registry_example_com="+token, "FAKE_TF_FAIL=apply",
		"FAKE_TF_STDERR=Error: the module printed "+token, "FAKE_TF_STDOUT=token in stdout: "+token)
	res, code := f.run()
	if code != runnerapi.ExitTerraformFailed {
		t.Fatalf("exit %d, result %+v", code, res)
	}
	resultFile, _ := os.ReadFile(f.cfg.ResultFile)
	for where, text := range map[string]string{"result error": res.Error, "result file": string(resultFile), "stdout": f.out.String()} {
		if strings.Contains(text, token) {
			t.Errorf("%s leaks the registry token:\n%s", where, text)
		}
	}
	if !strings.Contains(res.Error, "the module printed "+Mask) {
		t.Errorf("error does not show the token masked:\n%s", res.Error)
	}
}

func TestResultCappedAt4KiB(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		b.WriteString("│ Error: a very long diagnostic line with <html> & \"quotes\" and ünïcødé, number ")
		b.WriteString(strings.Repeat("x", i%50))
		b.WriteString("\n")
	}
	b.WriteString("THE-LAST-LINE")
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR="+b.String())
	res, _ := f.run() // run checks the file is at most 4 KiB and valid JSON
	raw, _ := os.ReadFile(f.cfg.ResultFile)
	var onDisk runnerapi.Result
	if err := json.Unmarshal(raw, &onDisk); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(onDisk.Error, runnerapi.TruncatedMarker) || !strings.HasSuffix(onDisk.Error, "THE-LAST-LINE") {
		t.Fatalf("truncated error should keep the end behind the marker: %q ... %q", onDisk.Error[:40], onDisk.Error[len(onDisk.Error)-40:])
	}
	if len(raw) < runnerapi.MaxResultBytes-200 {
		t.Fatalf("result uses only %d of %d bytes", len(raw), runnerapi.MaxResultBytes)
	}
	if res.Outcome != runnerapi.OutcomeFailed || len(onDisk.Steps) != 2 {
		t.Fatalf("result %+v", onDisk)
	}
}

func TestSIGTERMIsForwardedAndReportedInterrupted(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("FAKE_TF_BLOCK=apply")
	signals := make(chan os.Signal)
	f.cfg.Signals = signals
	type ret struct {
		res  runnerapi.Result
		code int
	}
	done := make(chan ret, 1)
	go func() { r, c := f.run(); done <- ret{r, c} }()
	waitFor(t, "the apply to start", func() bool { return len(f.events("started")) == 1 })
	signals <- syscall.SIGTERM
	r := <-done
	if r.code != runnerapi.ExitInterrupted || r.res.Outcome != runnerapi.OutcomeInterrupted {
		t.Fatalf("exit %d, result %+v", r.code, r.res)
	}
	got := f.events("signal")
	if len(got) != 1 || got[0].Signal != syscall.SIGTERM.String() {
		t.Fatalf("the child received %+v, want one SIGTERM", got)
	}
	if !strings.Contains(r.res.Error, "interrupted by terminated during apply") || !strings.Contains(r.res.Error, "Gracefully shutting down") {
		t.Fatalf("error %q", r.res.Error)
	}
	if last := r.res.Steps[len(r.res.Steps)-1]; last.Name != StepApply || last.ExitCode != 1 {
		t.Fatalf("steps %+v", r.res.Steps)
	}
}

func TestSecondSignalIsNotForwarded(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	release := filepath.Join(t.TempDir(), "release")
	f.env("FAKE_TF_BLOCK=apply", "FAKE_TF_RELEASE="+release)
	signals := make(chan os.Signal) // unbuffered: a send returns once the runner took it
	f.cfg.Signals = signals
	var forwarded atomic.Int32
	f.cfg.SignalChild = func(p *os.Process, s os.Signal) error {
		forwarded.Add(1)
		return p.Signal(s)
	}
	done := make(chan int, 1)
	go func() { _, c := f.run(); done <- c }()
	waitFor(t, "the apply to start", func() bool { return len(f.events("started")) == 1 })
	signals <- syscall.SIGTERM
	waitFor(t, "the child to get the first signal", func() bool { return len(f.events("signal")) == 1 })
	signals <- syscall.SIGINT
	// The runner takes this third signal only after it handled the second one completely.
	signals <- syscall.SIGTERM
	if n := forwarded.Load(); n != 1 {
		t.Fatalf("forwarded %d signals, want 1 (a second interrupt makes terraform exit at once)", n)
	}
	write(t, release, "")
	if code := <-done; code != runnerapi.ExitInterrupted {
		t.Fatalf("exit %d", code)
	}
	if got := f.events("signal"); len(got) != 1 {
		t.Fatalf("the child received %d signals", len(got))
	}
}

func TestSignalStopsBeforeTheNextStep(t *testing.T) {
	t.Run("during init", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationApply, nil)
		f.env("FAKE_TF_BLOCK=init")
		signals := make(chan os.Signal)
		f.cfg.Signals = signals
		done := make(chan runnerapi.Result, 1)
		go func() { r, _ := f.run(); done <- r }()
		waitFor(t, "init to start", func() bool { return len(f.events("started")) == 1 })
		signals <- syscall.SIGINT
		res := <-done
		if res.Outcome != runnerapi.OutcomeInterrupted {
			t.Fatalf("result %+v", res)
		}
		if got := argsOf(f.calls()); len(got) != 1 || !strings.HasPrefix(got[0], "init") {
			t.Fatalf("commands after an interrupted init: %q", got)
		}
	})
	t.Run("before any step", func(t *testing.T) {
		f := newFixture(t, runnerapi.OperationDestroy, nil)
		signals := make(chan os.Signal, 1)
		signals <- syscall.SIGTERM
		f.cfg.Signals = signals
		res, code := f.run()
		if code != runnerapi.ExitInterrupted || res.Outcome != runnerapi.OutcomeInterrupted || len(res.Steps) != 0 {
			t.Fatalf("exit %d result %+v", code, res)
		}
		if got := f.calls(); len(got) != 0 {
			t.Fatalf("commands ran: %v", argsOf(got))
		}
	})
}

func TestChildRunsInItsOwnProcessGroup(t *testing.T) {
	f := newFixture(t, runnerapi.OperationPlan, nil)
	if _, code := f.run(); code != runnerapi.ExitOK {
		t.Fatalf("exit %d\n%s", code, f.out)
	}
	for _, c := range f.calls() {
		if c.Pgid == syscall.Getpgrp() {
			t.Fatalf("%v shares the runner's process group %d: a terminal Ctrl-C would reach it twice", c.Args, c.Pgid)
		}
	}
}

func TestChildEnvironmentCannotMoveTheState(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("TF_WORKSPACE=prod", "TF_DATA_DIR=/elsewhere", "TF_CLI_ARGS=-lock=false", "TF_CLI_ARGS_apply=-lock=false",
		"KUBE_HOST=https://other:6443", "KUBE_TOKEN=t", "KUBE_CTX=other", "KUBE_PROXY_URL=http://proxy", "KUBE_NAMESPACE=other",
		"KUBE_CONFIG_PATH=/kc")
	if _, code := f.run(); code != runnerapi.ExitOK {
		t.Fatalf("exit %d\n%s", code, f.out)
	}
	for _, c := range f.calls() {
		want := map[string]string{"TF_WORKSPACE": "default", "TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1",
			"TMPDIR": filepath.Join(f.cfg.WorkDir, "tmp"), "KUBE_CONFIG_PATH": "/kc"}
		if !mapsEqual(c.Env, want) {
			t.Fatalf("%v ran with %v, want %v", c.Args, c.Env, want)
		}
	}
}

func TestBackendRecordedByInitIsVerified(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("FAKE_TF_INIT_BACKEND=elsewhere")
	res, code := f.run()
	if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed {
		t.Fatalf("exit %d result %+v", code, res)
	}
	if got := argsOf(f.calls()); len(got) != 1 {
		t.Fatalf("commands after a misplaced backend: %q", got)
	}
	if !strings.Contains(res.Error, "elsewhere/tfstate-default-"+testSuffix) {
		t.Fatalf("error %q", res.Error)
	}
}

func TestBackendOverrideWrittenForTheMode(t *testing.T) {
	for name, env := range map[string][]string{"in-cluster": nil, "kubeconfig": {"KUBE_CONFIG_PATH=/tmp/kc"}} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, runnerapi.OperationPlan, nil)
			f.env(env...)
			if _, code := f.run(); code != runnerapi.ExitOK {
				t.Fatalf("exit %d\n%s", code, f.out)
			}
			b, err := os.ReadFile(filepath.Join(f.cfg.WorkDir, "module", BackendOverrideFile))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Terraform struct {
					Backend struct {
						Kubernetes map[string]any `json:"kubernetes"`
					} `json:"backend"`
				} `json:"terraform"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			k := doc.Terraform.Backend.Kubernetes
			if k["namespace"] != "team-a" || k["secret_suffix"] != testSuffix {
				t.Fatalf("override %s", b)
			}
			if name == "in-cluster" && (k["in_cluster_config"] != true || k["config_path"] != nil) {
				t.Fatalf("override %s", b)
			}
			if name == "kubeconfig" && (k["in_cluster_config"] != false || k["config_path"] != "/tmp/kc") {
				t.Fatalf("override %s", b)
			}
		})
	}
}

func TestBadInputs(t *testing.T) {
	cases := map[string]func(f *fixture){
		"unknown operation":  func(f *fixture) { f.cfg.Operation = "Import" },
		"no redact.json":     func(f *fixture) { _ = os.Remove(filepath.Join(f.cfg.InputsDir, runnerapi.KeyRedact)) },
		"redact.json object": func(f *fixture) { write(f.t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRedact), `{"a":"b"}`) },
		"backend bad namespace": func(f *fixture) {
			write(f.t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyBackend), `{"namespace":"Team_A","secret_suffix":"x"}`)
		},
		"backend extra field": func(f *fixture) {
			write(f.t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyBackend), `{"namespace":"a","secret_suffix":"x","workspace":"prod"}`)
		},
		"variables not object":  func(f *fixture) { write(f.t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyVariables), `["a"]`) },
		"restore without state": func(f *fixture) { f.cfg.Operation = runnerapi.OperationRestore },
		"no module":             func(f *fixture) { f.cfg.ModuleDir = filepath.Join(f.cfg.ModuleDir, "missing") },
		"no work dir":           func(f *fixture) { f.cfg.WorkDir = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, runnerapi.OperationApply, nil)
			mutate(f)
			res, code := f.run()
			if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed || res.Error == "" {
				t.Fatalf("exit %d result %+v", code, res)
			}
			if len(f.calls()) != 0 {
				t.Fatalf("terraform ran: %v", argsOf(f.calls()))
			}
		})
	}
}

func TestBinaryMissing(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.cfg.Binary = ""
	f.cfg.Environ = []string{"PATH=" + t.TempDir()}
	res, code := f.run()
	if code != runnerapi.ExitBinaryMissing || !strings.Contains(res.Error, "neither tofu nor terraform") {
		t.Fatalf("exit %d result %+v", code, res)
	}
}

func TestRestorePushesAnAcceptableState(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	pushed := filepath.Join(t.TempDir(), "pushed")
	current := filepath.Join(t.TempDir(), "current")
	write(t, current, `{"version":4,"lineage":"l1","serial":9,"resources":[{"type":"terraform_data"}],"outputs":{}}`)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), `{"version":4,"terraform_version":"1.10.10","lineage":"l1","serial":5,"resources":[],"outputs":{"o":{"value":"old"}},"check_results":null}`)
	f.env("FAKE_TF_PULL="+current, "FAKE_TF_PUSHED="+pushed)
	if _, code := f.run(); code != runnerapi.ExitOK {
		t.Fatalf("exit %d\n%s", code, f.out)
	}
	b, err := os.ReadFile(pushed)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseStateHeader(b)
	if err != nil || h.Serial != 10 || h.Lineage != "l1" || h.Outputs != 1 {
		t.Fatalf("pushed %s (%+v, %v)", b, h, err)
	}
	for _, c := range f.calls() {
		if slices.Contains(c.Args, "-force") {
			t.Fatalf("restore used -force: %v", c.Args)
		}
	}
	if strings.Contains(f.out.String(), `"lineage":"l1","serial":9`) {
		t.Fatalf("state pull output was printed:\n%s", f.out)
	}
}

func TestRestoreRefusesAnotherLineage(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	current := filepath.Join(t.TempDir(), "current")
	write(t, current, `{"version":4,"lineage":"live","serial":9,"resources":[{"type":"terraform_data"}],"outputs":{}}`)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), `{"version":4,"lineage":"other","serial":50,"resources":[],"outputs":{}}`)
	f.env("FAKE_TF_PULL="+current, "FAKE_TF_PUSHED="+filepath.Join(t.TempDir(), "pushed"))
	res, code := f.run()
	if code != runnerapi.ExitBadInput || !strings.Contains(res.Error, "refusing to restore") {
		t.Fatalf("exit %d result %+v", code, res)
	}
	for _, c := range f.calls() {
		if slices.Contains(c.Args, "push") {
			t.Fatalf("pushed anyway: %v", c.Args)
		}
	}
}

func TestPlanRestore(t *testing.T) {
	backup := []byte(`{"version":4,"lineage":"l1","serial":3,"resources":[],"outputs":{}}`)
	h, err := parseStateHeader(backup)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, current string
		wantSerial    uint64
		wantErr       bool
	}{
		{"no state", "", 3, false},
		{"empty other lineage", `{"version":4,"lineage":"l2","serial":7,"resources":[],"outputs":{}}`, 3, false},
		{"newer same lineage", `{"version":4,"lineage":"l1","serial":7,"resources":[{}],"outputs":{}}`, 8, false},
		{"older same lineage", `{"version":4,"lineage":"l1","serial":1,"resources":[{}],"outputs":{}}`, 3, false},
		{"other lineage with resources", `{"version":4,"lineage":"l2","serial":1,"resources":[{}],"outputs":{}}`, 0, true},
		{"other lineage with outputs", `{"version":4,"lineage":"l2","serial":1,"resources":[],"outputs":{"a":{}}}`, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := planRestore([]byte(tc.current), backup, h)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if err != nil {
				return
			}
			got, err := parseStateHeader(out)
			if err != nil || got.Serial != tc.wantSerial || got.Lineage != "l1" {
				t.Fatalf("pushed %s", out)
			}
		})
	}
}

func TestMainCommandLine(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "runner")
	var out, errOut lockedBuffer
	if code := Main(context.Background(), []string{"install", dest}, nil, &out, &errOut, nil); code != runnerapi.ExitOK {
		t.Fatalf("install exit %d: %s %s", code, out.String(), errOut.String())
	}
	self, _ := os.Executable()
	a, _ := os.ReadFile(self)
	b, err := os.ReadFile(dest)
	if err != nil || string(a) != string(b) {
		t.Fatalf("install did not copy the executable: %v", err)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed mode %v", fi.Mode())
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"install"}, {"run", "--no-such-flag"}, {"run", "extra"},
		{"channel", "--no-such-flag"}, {"channel"}, {"channel", "extra"}} {
		if code := Main(context.Background(), args, nil, &out, &errOut, nil); code != runnerapi.ExitBadInput {
			t.Errorf("%q: exit %d, want %d", args, code, runnerapi.ExitBadInput)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func eqPtr(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
