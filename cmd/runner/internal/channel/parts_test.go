package channel

import (
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The channel checks a lock holder's Job by its owner-name label, which the controller writes
// with naming.LabelValue; the runner keeps its own copy of that function.
func TestLabelValueIsNamingLabelValue(t *testing.T) {
	for _, name := range []string{"m", strings.Repeat("a", 63), strings.Repeat("b", 64), strings.Repeat("c-", 100), "x." + strings.Repeat("y", 70)} {
		if got, want := runnerapi.LabelValue(name), naming.LabelValue(name); got != want {
			t.Errorf("%d chars: %q, naming says %q", len(name), got, want)
		}
	}
}

func TestParsePath(t *testing.T) {
	cases := map[string]bool{
		"/state/ns/0123456789abcdef": true, "/state/ns/": false, "/state//x": false, "/state/ns/x/y": false,
		"/state/ns": false, "/other/ns/x": false, "/state/ns/x/../y": false,
	}
	for p, want := range cases {
		if _, _, ok := parsePath(StatePathPrefix, p); ok != want {
			t.Errorf("%s: %t", p, ok)
		}
		plan := strings.Replace(p, "/state/", runnerapi.PlanPathPrefix, 1)
		if _, _, ok := parsePath(runnerapi.PlanPathPrefix, plan); ok != want {
			t.Errorf("%s: %t", plan, ok)
		}
	}
}

// The channel names the plan Secret itself; the controller creates it with naming's name.
func TestPlanSecretNameIsNamings(t *testing.T) {
	s := naming.StateSuffix("ns", "TerraformCluster", "demo")
	if got, want := runnerapi.PlanSecretName(s), naming.PlanSecretName(s); got != want {
		t.Fatalf("%q, naming says %q", got, want)
	}
}

func TestConfigPlanFlags(t *testing.T) {
	base := []string{"--namespace=ns", "--suffix=s", "--job=j", "--run-lease=r", "--owner-kind=k", "--owner-name=n", "--owner-uid=u"}
	env := []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p"}
	id := runnerapi.PlanID("f", "h", 1, "l")
	for args, wantErr := range map[string]string{
		"--operation=Plan --inputs-hash=sha256:1":                               "",
		"--operation=Plan":                                                      "inputs-hash",
		"--operation=Apply --plan-id=" + id:                                     "",
		"--operation=Refresh --plan-id=" + id:                                   "",
		"--operation=Plan --inputs-hash=h --plan-id=" + id:                      "for an Apply, a Refresh or a Destroy Job",
		"--operation=Drift --plan-id=" + id:                                     "for an Apply, a Refresh or a Destroy Job",
		"--operation=Destroy --plan-id=" + id:                                   "",
		"--operation=Plan --inputs-hash=sha256:1 --destroy-plan":                "",
		"--operation=Destroy --destroy-plan":                                    "--destroy-plan is for a Plan Job",
		"--operation=Plan --inputs-hash=sha256:1 --destroy-plan --refresh-only": "--destroy-plan is for a Plan Job",
		"--operation=Apply --plan-id=ABC":                                       "not a plan ID",
		"--operation=Import":                                                    "unknown operation",
		"--operation=Plan --inputs-hash=sha256:1 --refresh-only":                "",
		"--operation=Plan --inputs-hash=sha256:1 --refresh-only=true":           "",
		"--operation=Refresh --refresh-only":                                    "--refresh-only is for a Plan Job",
		"--operation=Apply --plan-id=" + id + " --refresh-only":                 "--refresh-only is for a Plan Job",
		"--refresh-only":                                                        "--refresh-only is for a Plan Job",
	} {
		cfg, err := parse(append(append([]string{}, base...), strings.Fields(args)...), env, &strings.Builder{})
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: %v, want an error about %s", args, err, wantErr)
		case wantErr == "" && strings.Contains(args, "plan-id") && cfg.PlanID != id:
			t.Errorf("%s: plan ID %q", args, cfg.PlanID)
		case wantErr == "" && cfg.RefreshOnly != strings.Contains(args, "refresh-only"):
			t.Errorf("%s: refresh-only %t", args, cfg.RefreshOnly)
		}
	}
}

// The channel's flags as the controller writes them (runnerapi.ChannelCommand) parse to the
// Job's kind of plan.
func TestChannelCommandRefreshOnly(t *testing.T) {
	env := []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p"}
	inv := runnerapi.ChannelInvocation{Dir: "/c", Namespace: "ns", Suffix: "s", Job: "j", RunLease: "r", OwnerKind: "k", OwnerName: "n", OwnerUID: "u",
		TokenFile: "/t", CAFile: "/ca", Operation: runnerapi.OperationPlan, InputsHash: "sha256:1", RefreshOnly: true}
	cfg, err := parse(runnerapi.ChannelCommand("runner", inv)[2:], env, &strings.Builder{})
	if err != nil || !cfg.RefreshOnly || cfg.Operation != runnerapi.OperationPlan {
		t.Fatalf("%+v, %v", cfg, err)
	}
	inv.RefreshOnly = false
	if cfg, err = parse(runnerapi.ChannelCommand("runner", inv)[2:], env, &strings.Builder{}); err != nil || cfg.RefreshOnly {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

// --target is one argument (blanks included) that runnerapi.ParseTarget reads, on a Plan Job
// that is neither refresh-only nor a destroy plan only.
func TestConfigTargetFlag(t *testing.T) {
	base := []string{"--namespace=ns", "--suffix=s", "--job=j", "--run-lease=r", "--owner-kind=k", "--owner-name=n", "--owner-uid=u"}
	env := []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p"}
	plan := []string{"--operation=Plan", "--inputs-hash=sha256:1"}
	id := runnerapi.PlanID("f", "h", 1, "l")
	cases := []struct {
		args    []string
		target  string
		wantErr string
	}{
		{args: plan, target: "replace terraform_data.a"},
		{args: plan, target: "import module.m.terraform_data.a[0] an id with blanks"},
		{args: plan, target: "replace", wantErr: `want "replace <address>"`},
		{args: plan, target: "taint terraform_data.a", wantErr: `unknown operation "taint"`},
		{args: append([]string{"--refresh-only"}, plan...), target: "replace terraform_data.a", wantErr: "--target is for a Plan Job that is neither"},
		{args: append([]string{"--destroy-plan"}, plan...), target: "replace terraform_data.a", wantErr: "--target is for a Plan Job that is neither"},
		{args: []string{"--operation=Apply", "--plan-id=" + id}, target: "replace terraform_data.a", wantErr: "--target is for a Plan Job"},
		{args: []string{"--operation=Destroy"}, target: "replace terraform_data.a", wantErr: "--target is for a Plan Job"},
		{args: nil, target: "replace terraform_data.a", wantErr: "--target is for a Plan Job"},
	}
	for _, tc := range cases {
		args := append(append(append([]string{}, base...), tc.args...), "--"+runnerapi.FlagTarget+"="+tc.target)
		cfg, err := parse(args, env, &strings.Builder{})
		switch {
		case tc.wantErr == "" && (err != nil || cfg.Target != tc.target):
			t.Errorf("%q: target %q, %v", args, cfg.Target, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: %v, want an error about %s", args, err, tc.wantErr)
		}
	}
	// As the controller writes it.
	inv := runnerapi.ChannelInvocation{Dir: "/c", Namespace: "ns", Suffix: "s", Job: "j", RunLease: "r", OwnerKind: "k", OwnerName: "n", OwnerUID: "u",
		TokenFile: "/t", CAFile: "/ca", Operation: runnerapi.OperationPlan, InputsHash: "sha256:1", Target: "import terraform_data.a x y"}
	if cfg, err := parse(runnerapi.ChannelCommand("runner", inv)[2:], env, &strings.Builder{}); err != nil || cfg.Target != inv.Target {
		t.Fatalf("%+v, %v", cfg, err)
	}
}
