package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// moduleOf writes files (name -> content) into a new module folder.
func moduleOf(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, path, content)
	}
	return dir
}

func TestUndeclaredVariables(t *testing.T) {
	native := `
terraform {
  required_version = ">= 1.5"
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

# A variable block in a comment declares nothing: variable "commented" {}
locals {
  variable = "not a block"
}

resource "terraform_data" "x" {
  input = var.region
}
`
	cases := []struct {
		name  string
		files map[string]string
		vars  string
		want  []string
	}{
		{"native syntax: declared in one file, set", map[string]string{"main.tf": native, "other.tf": `output "o" { value = 1 }`},
			`{"region":"x"}`, nil},
		{"native syntax: one undeclared", map[string]string{"main.tf": native},
			`{"region":"x","zone":"a","commented":1,"variable":true}`, []string{"commented", "variable", "zone"}},
		{"JSON syntax, as an object and as a list of objects", map[string]string{
			"vars.tf.json":  `{"variable": {"size": {"type": "number"}, "name": {}}, "output": {"o": {"value": "x"}}}`,
			"more.tf.json":  `{"variable": [{"tags": {}}, {"labels": {"default": {}}}]}`,
			"empty.tf.json": `{}`},
			`{"size":3,"name":"n","tags":{},"labels":{},"color":"red"}`, []string{"color"}},
		{"OpenTofu files, native and JSON", map[string]string{
			"main.tofu":      `variable "a" {}`,
			"vars.tofu.json": `{"variable": {"b": {}}}`,
			"main.tf":        `variable "c" { type = any }`},
			`{"a":1,"b":2,"c":3,"d":4}`, []string{"d"}},
		{"CAPTF's own variable is never reported", map[string]string{"main.tf": `resource "terraform_data" "x" {}`},
			`{"captf":{"kind":"TerraformCluster"},"size":1}`, []string{"size"}},
		{"files terraform skips, other modules and other suffixes declare nothing", map[string]string{
			"main.tf":                     `variable "kept" {}`,
			".hidden.tf":                  `variable "hidden" {}`,
			"main.tf~":                    `variable "backup" {}`,
			"#main.tf#":                   `variable "autosave" {}`,
			"modules/net/variables.tf":    `variable "child" {}`,
			"variables.tfvars":            `declared = 1`,
			"tests/main.tftest.hcl":       `variables { tested = 1 }`,
			"notes.txt":                   `variable "text" {}`,
			"zz_captf_override.tf.json":   `{"terraform": {"backend": {"http": {}}}}`,
			"terraform.tfstate.backup.tf": `variable "oddly_named" {}`},
			`{"kept":1,"hidden":1,"backup":1,"autosave":1,"child":1,"declared":1,"tested":1,"text":1,"oddly_named":1}`,
			[]string{"autosave", "backup", "child", "declared", "hidden", "tested", "text"}},
		{"nothing set", map[string]string{"main.tf": native}, `{}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := moduleOf(t, tc.files)
			varFile := filepath.Join(t.TempDir(), runnerapi.KeyVariables)
			write(t, varFile, tc.vars)
			got, err := UndeclaredVariables(dir, varFile)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("undeclared = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUndeclaredVariablesUnknownWhenAFileDoesNotParse(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"native syntax":           {"main.tf": `variable "a" {}`, "broken.tf": `variable "b" {`},
		"JSON syntax":             {"main.tf": `variable "a" {}`, "broken.tf.json": `{"variable": {"b": {}}`},
		"OpenTofu file":           {"main.tf": `variable "a" {}`, "broken.tofu": `resource "x" {`},
		"a variable with no name": {"main.tf": `variable "a" {}`, "bad.tf": `variable {}`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := moduleOf(t, files)
			varFile := filepath.Join(t.TempDir(), runnerapi.KeyVariables)
			write(t, varFile, `{"a":1,"z":2}`)
			if got, err := UndeclaredVariables(dir, varFile); err == nil {
				t.Fatalf("undeclared = %q, want an error (unknown)", got)
			}
		})
	}
}

func TestOnlyTheCommandsThatReadTheVariablesFilePassIt(t *testing.T) {
	cases := []struct {
		op   string
		o    StepOptions
		want bool
	}{
		{runnerapi.OperationApply, StepOptions{}, true},
		{runnerapi.OperationDestroy, StepOptions{}, true},
		{runnerapi.OperationPlan, StepOptions{}, true},
		{runnerapi.OperationPlan, StepOptions{DestroyPlan: true}, true},
		{runnerapi.OperationPlan, StepOptions{RefreshOnly: true}, true},
		{runnerapi.OperationDrift, StepOptions{}, true},
		{runnerapi.OperationDrift, StepOptions{RefreshOnly: true}, true},
		{runnerapi.OperationRefresh, StepOptions{}, true},
		{runnerapi.OperationApply, StepOptions{ApplySavedPlan: true}, false},
		{runnerapi.OperationDestroy, StepOptions{ApplySavedPlan: true}, false},
		{runnerapi.OperationRefresh, StepOptions{ApplySavedPlan: true}, false},
		{runnerapi.OperationRestore, StepOptions{}, false},
	}
	for _, tc := range cases {
		tc.o.VarFile, tc.o.PlanFile, tc.o.PushFile = "IN/variables.tfvars.json", "W/plan", "W/push"
		steps, err := Steps(tc.op, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := passesVarFile(steps); got != tc.want {
			t.Errorf("%s %+v: passes the variables file = %t, want %t", tc.op, tc.o, got, tc.want)
		}
	}
}

// TestRunReportsUndeclaredVariables runs each operation against the fake terraform with a
// module that declares "name" but not "extra".
func TestRunReportsUndeclaredVariables(t *testing.T) {
	cases := []struct {
		op          string
		refreshOnly bool
		want        []string
	}{
		{runnerapi.OperationApply, false, []string{"extra", "more"}},
		{runnerapi.OperationDestroy, false, []string{"extra", "more"}},
		{runnerapi.OperationPlan, false, []string{"extra", "more"}},
		{runnerapi.OperationPlan, true, []string{"extra", "more"}},
		{runnerapi.OperationDrift, false, []string{"extra", "more"}},
		{runnerapi.OperationRefresh, false, []string{"extra", "more"}},
		// A restore passes no variables file: nothing to report.
		{runnerapi.OperationRestore, false, nil},
	}
	for _, tc := range cases {
		name := tc.op
		if tc.refreshOnly {
			name += "-refresh-only"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.op, nil)
			f.cfg.RefreshOnly = tc.refreshOnly
			write(t, filepath.Join(f.cfg.ModuleDir, "variables.tf"), `variable "name" { type = string }`)
			write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyVariables), `{"name":"alpha","more":"x","extra":1,"captf":{}}`)
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
			if !slices.Equal(res.UndeclaredVariables, tc.want) {
				t.Fatalf("undeclared = %q, want %q", res.UndeclaredVariables, tc.want)
			}
			b, err := os.ReadFile(f.cfg.ResultFile)
			if err != nil {
				t.Fatal(err)
			}
			onDisk, err := runnerapi.ParseResult(b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(onDisk.UndeclaredVariables, tc.want) {
				t.Fatalf("result file names %q, want %q", onDisk.UndeclaredVariables, tc.want)
			}
		})
	}
}

// TestRunReportsNothingWhenTheModuleDoesNotParse: a module file that does not parse is no
// failure of the runner (terraform reports it); the run reports no undeclared variables.
func TestRunReportsNothingWhenTheModuleDoesNotParse(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	write(t, filepath.Join(f.cfg.ModuleDir, "broken.tf"), `variable "name" {`)
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d, result %+v\n%s", code, res, f.out)
	}
	if res.UndeclaredVariables != nil {
		t.Fatalf("undeclared = %q, want none (unknown)", res.UndeclaredVariables)
	}
}

// TestRunReportsNothingWhenInitFails: the module is read only once init succeeded.
func TestRunReportsNothingWhenInitFails(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.env("FAKE_TF_FAIL=init")
	res, _ := f.run()
	if res.Outcome != runnerapi.OutcomeFailed || res.UndeclaredVariables != nil {
		t.Fatalf("outcome %s, undeclared %q; want Failed and none", res.Outcome, res.UndeclaredVariables)
	}
}
