package planpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The example rules of docs/plans.md.
const (
	noDBDeletes   = `changes.all(c, !(c.type == 'aws_db_instance' && c.action in ['delete', 'replace']))`
	atMostTen     = `summary.total <= 10`
	noReplace     = `!changes.exists(c, c.action == 'replace')`
	smallInstance = `changes.all(c, c.type != 'aws_instance' || c.action == 'delete' || c.after.instance_type != 'm5.24xlarge')`
)

func policy(name string, sel *metav1.LabelSelector, rules ...infrav1.PlanPolicyRule) infrav1.TerraformPlanPolicy {
	p := infrav1.TerraformPlanPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.NamespaceSelector = sel
	p.Spec.Rules = rules
	return p
}

func rule(name, expr, msg string) infrav1.PlanPolicyRule {
	return infrav1.PlanPolicyRule{Name: name, Expression: expr, Message: msg}
}

// planOf is a JSON plan with the given changes (address type actions...), and its summary.
func planOf(changes ...[]string) ([]byte, runnerapi.PlanSummary) {
	var entries []string
	var sum runnerapi.PlanSummary
	for _, c := range changes {
		acts := `"` + strings.Join(c[2:], `","`) + `"`
		entries = append(entries, fmt.Sprintf(`{"address":%q,"mode":"managed","type":%q,"name":"n","provider_name":"p","change":{"actions":[%s],"before":null,"after":{"instance_type":"m5.large"}}}`,
			c[0], c[1], acts))
		sum.Add(c[0], c[2:])
	}
	return []byte(`{"format_version":"1.2","resource_changes":[` + strings.Join(entries, ",") + `]}`), sum
}

func input(planJSON []byte, sum runnerapi.PlanSummary) Input {
	return Input{PlanJSON: planJSON, Summary: sum, Namespace: "prod", NamespaceLabels: map[string]string{"env": "prod"},
		Object: map[string]any{"kind": "TerraformCluster", "metadata": map[string]any{"name": "c", "labels": map[string]any{"tier": "gold"}}}}
}

func TestJudgeTheDocumentedRules(t *testing.T) {
	createOnly, createSum := planOf([]string{"aws_db_instance.main", "aws_db_instance", "create"}, []string{"aws_instance.web", "aws_instance", "create"})
	deletesDB, deleteSum := planOf([]string{"aws_db_instance.main", "aws_db_instance", "delete"}, []string{"aws_instance.web", "aws_instance", "update"})
	replacesDB, replaceSum := planOf([]string{"aws_db_instance.main", "aws_db_instance", "delete", "create"})
	var many [][]string
	for i := range 11 {
		many = append(many, []string{fmt.Sprintf("null_resource.n[%d]", i), "null_resource", "create"})
	}
	eleven, elevenSum := planOf(many...)
	noop, noopSum := planOf([]string{"aws_db_instance.main", "aws_db_instance", "no-op"})
	policies := []infrav1.TerraformPlanPolicy{
		policy("databases", nil, rule("no-db-deletes", noDBDeletes, "databases are never deleted by a plan; ask the DBA team")),
		policy("size", nil, rule("at-most-ten", atMostTen, "")),
	}
	for _, tc := range []struct {
		name string
		plan []byte
		sum  runnerapi.PlanSummary
		want []string
	}{
		{"create only", createOnly, createSum, nil},
		{"no-op", noop, noopSum, nil},
		{"delete of a database", deletesDB, deleteSum, []string{"databases/no-db-deletes: databases are never deleted by a plan; ask the DBA team"}},
		{"replace of a database", replacesDB, replaceSum, []string{"databases/no-db-deletes: databases are never deleted by a plan; ask the DBA team"}},
		{"eleven changes", eleven, elevenSum, []string{"size/at-most-ten: the plan breaks " + atMostTen}},
	} {
		got := Judge(context.Background(), policies, input(tc.plan, tc.sum))
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: violations %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestJudgeFailsClosed(t *testing.T) {
	plan, sum := planOf([]string{"aws_db_instance.main", "aws_db_instance", "delete"})
	allow := []infrav1.TerraformPlanPolicy{policy("allow", nil, rule("always", "true", ""))}
	if v := Judge(context.Background(), allow, input(plan, sum)); v != nil {
		t.Fatalf("a rule that holds gave %q", v)
	}

	t.Run("a JSON plan that lists fewer changes than the record counts", func(t *testing.T) {
		cut := []byte(`{"captf_truncated":{"reason":"the JSON plan did not fit"},"resource_changes":[]}`)
		v := Judge(context.Background(), allow, input(cut, sum))
		if len(v) != 1 || !strings.Contains(v[0], "lists 0 of the plan's 1 changes (the JSON plan did not fit)") {
			t.Fatalf("violations %q", v)
		}
	})
	t.Run("a JSON plan that is not JSON", func(t *testing.T) {
		if v := Judge(context.Background(), allow, input([]byte("{"), sum)); len(v) != 1 || !strings.Contains(v[0], "not readable") {
			t.Fatalf("violations %q", v)
		}
	})
	t.Run("a rule that does not compile (admitted during a webhook outage)", func(t *testing.T) {
		v := Judge(context.Background(), []infrav1.TerraformPlanPolicy{policy("p", nil, rule("broken", "changes.all(", "m"))}, input(plan, sum))
		if len(v) != 1 || !strings.HasPrefix(v[0], "p/broken: the rule does not compile") {
			t.Fatalf("violations %q", v)
		}
	})
	t.Run("a rule that fails at run time", func(t *testing.T) {
		v := Judge(context.Background(), []infrav1.TerraformPlanPolicy{policy("p", nil, rule("missing-key", "plan.no_such_key == 1", "m"))}, input(plan, sum))
		if len(v) != 1 || !strings.HasPrefix(v[0], "p/missing-key: the rule failed (no such key: no_such_key); m") {
			t.Fatalf("violations %q", v)
		}
	})
	t.Run("a rule over its time budget", func(t *testing.T) {
		// The estimate takes a list of plan as at most MaxPlanJSONBytes long; a longer one is
		// stopped by the time budget.
		expr := `plan.resource_drift.all(d, true)`
		if _, err := Compile(expr); err != nil {
			t.Fatalf("the estimator refused it: %v", err)
		}
		long := []byte(`{"resource_drift":[` + strings.Repeat("0,", 200000) + `0]}`)
		in := input(long, runnerapi.PlanSummary{})
		in.RuleTimeout = 50 * time.Millisecond
		v := Judge(context.Background(), []infrav1.TerraformPlanPolicy{policy("p", nil, rule("slow", expr, ""))}, in)
		if len(v) != 1 || !strings.Contains(v[0], "p/slow: the rule ran over its time budget of 50ms") {
			t.Fatalf("violations %q", v)
		}
	})
	t.Run("more changes than policies judge", func(t *testing.T) {
		var many [][]string
		for i := range MaxChanges + 1 {
			many = append(many, []string{fmt.Sprintf("n.r[%d]", i), "n", "create"})
		}
		p, s := planOf(many...)
		if v := Judge(context.Background(), allow, input(p, s)); len(v) != 1 || !strings.Contains(v[0], fmt.Sprintf("policies judge at most %d", MaxChanges)) {
			t.Fatalf("violations %q", v)
		}
	})
}

// A targeted operation's plans: an import (a no-op the record counts under import) and a forget
// are judged like any plan, and summary.forget counts what leaves the state.
func TestJudgeTargetedPlans(t *testing.T) {
	allow := []infrav1.TerraformPlanPolicy{policy("allow", nil, rule("always", "true", ""))}
	imported, importSum := planOf([]string{"aws_instance.adopted", "aws_instance", "no-op"})
	importSum.AddImport("aws_instance.adopted")
	if v := Judge(context.Background(), allow, input(imported, importSum)); v != nil {
		t.Errorf("an import-only plan: violations %q", v)
	}
	forgotten, forgetSum := planOf([]string{"aws_instance.old", "aws_instance", "forget"}, []string{"aws_instance.web", "aws_instance", "no-op"})
	if forgetSum.Forget != 1 || forgetSum.Changed() != 1 {
		t.Fatalf("forget summary %+v", forgetSum)
	}
	noForget := []infrav1.TerraformPlanPolicy{policy("keep", nil, rule("no-forget", "summary.forget == 0 && summary.total == 0", "ask the platform team before forgetting"))}
	if v := Judge(context.Background(), noForget, input(forgotten, forgetSum)); fmt.Sprint(v) != fmt.Sprint([]string{"keep/no-forget: ask the platform team before forgetting"}) {
		t.Errorf("a forget plan: violations %q", v)
	}
	byAction := []infrav1.TerraformPlanPolicy{policy("keep", nil, rule("no-forget", "!changes.exists(c, c.action == 'forget')", "m"))}
	if v := Judge(context.Background(), byAction, input(forgotten, forgetSum)); len(v) != 1 {
		t.Errorf("a rule on the forget action: violations %q", v)
	}
}

func TestJudgeSeesTheObjectAndTheNamespace(t *testing.T) {
	plan, sum := planOf([]string{"aws_instance.web", "aws_instance", "delete", "create"})
	p := []infrav1.TerraformPlanPolicy{policy("prod", nil,
		rule("no-replace-in-prod", `namespaceObject.labels['env'] != 'prod' || `+noReplace, "no replace in prod"),
		rule("gold", `object.metadata.labels.tier == 'gold'`, "gold only"),
		rule("sizes", smallInstance, ""),
	)}
	if v := Judge(context.Background(), p, input(plan, sum)); fmt.Sprint(v) != "[prod/no-replace-in-prod: no replace in prod]" {
		t.Fatalf("violations %q", v)
	}
	in := input(plan, sum)
	in.NamespaceLabels = map[string]string{"env": "dev"}
	if v := Judge(context.Background(), p, in); v != nil {
		t.Fatalf("dev: violations %q", v)
	}
}

func TestSelects(t *testing.T) {
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	for _, tc := range []struct {
		sel    *metav1.LabelSelector
		labels map[string]string
		want   bool
	}{
		{nil, nil, true},
		{&metav1.LabelSelector{}, map[string]string{"env": "dev"}, true},
		{prod, map[string]string{"env": "prod"}, true},
		{prod, map[string]string{"env": "dev"}, false},
		{prod, nil, false},
	} {
		p := policy("p", tc.sel, rule("r", "true", ""))
		if got, err := Selects(&p, tc.labels); err != nil || got != tc.want {
			t.Errorf("selector %v on %v: %v %v, want %v", tc.sel, tc.labels, got, err, tc.want)
		}
	}
}

func TestValidateRefusesWhatCannotRun(t *testing.T) {
	for _, expr := range []string{noDBDeletes, atMostTen, noReplace, smallInstance, `plan.terraform_version.startsWith('1.')`,
		`object.metadata.name.size() < 64`, `'delete' in changes.map(c, c.action) == false`} {
		if errs := Validate(policy("p", nil, rule("r", expr, "")).Spec, field.NewPath("spec")); len(errs) > 0 {
			t.Errorf("%s: refused: %v", expr, errs.ToAggregate())
		}
	}
	for expr, want := range map[string]string{
		`changes.all(c, c.type ==`: "compile",
		`no_such_variable == 1`:    "undeclared reference",
		`summary.total`:            "returns int; a rule returns a bool",
		`'x' + 1 == 'x1'`:          "no matching overload",
		`changes.all(a, changes.all(b, a.address != b.address || a == b))`:   "exceeds the limit of 1000000",
		`plan.resource_changes.all(c, plan.resource_changes.all(d, c != d))`: "exceeds the limit",
		`object.spec.variables.all(k, k.matches('^[a-z]+$'))`:                "exceeds the limit",
	} {
		errs := Validate(policy("p", nil, rule("r", expr, "")).Spec, field.NewPath("spec"))
		if len(errs) != 1 || errs[0].Field != "spec.rules[0].expression" || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%s: %v, want one error on spec.rules[0].expression saying %q", expr, errs.ToAggregate(), want)
		}
	}
	bad := policy("p", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Nope"}}}, rule("r", "true", ""), rule("r", "true", ""))
	errs := Validate(bad.Spec, field.NewPath("spec"))
	if len(errs) != 2 || errs[0].Field != "spec.namespaceSelector" || errs[1].Type != field.ErrorTypeDuplicate {
		t.Errorf("errors %v", errs)
	}
}

func TestJudgeBoundsTheViolations(t *testing.T) {
	plan, sum := planOf([]string{"a.b", "a", "create"})
	var rules []infrav1.PlanPolicyRule
	for i := range 12 {
		rules = append(rules, rule(fmt.Sprintf("r%02d", i), "false", strings.Repeat("m", 600)))
	}
	v := Judge(context.Background(), []infrav1.TerraformPlanPolicy{policy("p", nil, rules...)}, input(plan, sum))
	if len(v) != infrav1.MaxPlanViolations || v[len(v)-1] != "and 3 more violations" {
		t.Fatalf("%d violations, last %q", len(v), v[len(v)-1])
	}
	for _, s := range v {
		if len(s) > infrav1.MaxPlanViolationBytes {
			t.Errorf("a violation of %d bytes", len(s))
		}
	}
}
