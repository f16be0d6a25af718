package planpolicy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Limits of a rule, the ones Kubernetes sets for its own CEL (k8s.io/apiserver/pkg/apis/cel).
const (
	// PerCallLimit bounds the cost of one evaluation of one rule, and the estimated cost the
	// webhook admits.
	PerCallLimit = 1000000
	// RuleTimeout bounds the time of one evaluation of one rule: cel-go's cost tracking does
	// not bound the time of an iteration over a long list of the JSON plan (its cost grows
	// linearly, its time faster), so the engine stops a rule after this long, and the rule
	// counts as broken.
	RuleTimeout = 2 * time.Second
	// interruptEvery is how many iterations of a comprehension pass between two checks of the
	// deadline.
	interruptEvery = 100
	// MaxChanges is the most resource changes a plan may have for the policies to judge it
	// (the size the cost estimate assumes for `changes`); a larger plan is held.
	MaxChanges = 1000
)

// Size bounds the cost estimate assumes where the data's own size is not known.
const (
	// maxActions: a change's actions list holds one or two actions.
	maxActions = 2
	// maxObjectBytes is the largest object the API server stores (etcd's default request
	// limit), the bound of `object` and `namespace`.
	maxObjectBytes = 3 << 19
)

// The variables a rule sees.
const (
	// VarPlan is the JSON plan (runnerapi.PlanJSONKey) as a map.
	VarPlan = "plan"
	// VarChanges lists the plan's counted resource changes (create, update, replace, delete;
	// no-ops and reads left out), each a map of address, module, mode, type, name, provider,
	// action (one of runnerapi.ActionCreate, ActionUpdate, ActionReplace, ActionDelete),
	// actions (terraform's), before and after (masked).
	VarChanges = "changes"
	// VarSummary holds the counts create, update, replace, delete, forget and total (their sum).
	VarSummary = "summary"
	// VarObject is the TerraformCluster, TerraformMachine or TerraformMachinePool (apiVersion,
	// kind, metadata without managedFields, spec).
	VarObject = "object"
	// VarNamespace holds the object's namespace: name and labels (`namespace` is a word CEL reserves).
	VarNamespace = "namespaceObject"
)

var envOnce = sync.OnceValues(func() (*cel.Env, error) {
	dyn := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable(VarPlan, dyn),
		cel.Variable(VarChanges, cel.ListType(dyn)),
		cel.Variable(VarSummary, cel.MapType(cel.StringType, cel.IntType)),
		cel.Variable(VarObject, dyn),
		cel.Variable(VarNamespace, dyn),
		ext.Strings(),
		ext.Sets(),
		ext.Lists(),
		cel.CrossTypeNumericComparisons(true),
	)
})

// Compile compiles a rule's expression in the policies' environment and checks it returns a
// bool and its estimated cost fits PerCallLimit. The program it returns stops at PerCallLimit.
func Compile(expr string) (cel.Program, error) {
	env, err := envOnce()
	if err != nil {
		return nil, fmt.Errorf("plan policy environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compile: %w", iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression returns %s; a rule returns a bool", ast.OutputType())
	}
	est, err := env.EstimateCost(ast, sizes{})
	if err != nil {
		return nil, fmt.Errorf("estimate cost: %w", err)
	}
	if est.Max > PerCallLimit {
		return nil, fmt.Errorf("the estimated cost of the expression (%d) exceeds the limit of %d per evaluation: "+
			"iterate over `changes` (at most %d) rather than over lists of `plan` or `object`, and avoid nested iterations", est.Max, PerCallLimit, MaxChanges)
	}
	prg, err := env.Program(ast, cel.CostLimit(PerCallLimit), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return prg, nil
}

// sizes is the cost estimator: it knows the bounds of the variables the type declarations do
// not carry.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	p := n.Path()
	if len(p) == 0 {
		return nil
	}
	var max uint64
	switch {
	case len(p) == 1 && p[0] == VarChanges:
		max = MaxChanges
	case len(p) == 3 && p[0] == VarChanges && p[1] == "@items" && p[2] == "actions":
		max = maxActions
	case p[0] == VarChanges || p[0] == VarPlan:
		max = runnerapi.MaxPlanJSONBytes
	case p[0] == VarObject || p[0] == VarNamespace:
		max = maxObjectBytes
	default:
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: max}
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Validate is the admission check of a policy: a namespace selector that parses, and rules
// that compile (Compile).
func Validate(spec infrav1.TerraformPlanPolicySpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("namespaceSelector"), spec.NamespaceSelector, err.Error()))
		}
	}
	if len(spec.Rules) == 0 {
		errs = append(errs, field.Required(path.Child("rules"), "a policy holds at least one rule"))
	}
	seen := map[string]bool{}
	for i, r := range spec.Rules {
		rp := path.Child("rules").Index(i)
		if seen[r.Name] {
			errs = append(errs, field.Duplicate(rp.Child("name"), r.Name))
		}
		seen[r.Name] = true
		if _, err := Compile(r.Expression); err != nil {
			errs = append(errs, field.Invalid(rp.Child("expression"), r.Expression, err.Error()))
		}
	}
	return errs
}

// Selects reports whether the policy judges the objects of a namespace with these labels.
func Selects(p *infrav1.TerraformPlanPolicy, nsLabels map[string]string) (bool, error) {
	if p.Spec.NamespaceSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("policy %s: namespace selector: %w", p.Name, err)
	}
	return sel.Matches(labels.Set(nsLabels)), nil
}

// Selecting are the policies that judge the objects of a namespace with these labels. A policy
// whose namespace selector does not parse (the webhook refuses one; one may have slipped
// through) selects every object, so it holds plans rather than letting them by: unparsable
// says why for each such policy, by name.
func Selecting(policies []infrav1.TerraformPlanPolicy, nsLabels map[string]string) (selected []infrav1.TerraformPlanPolicy, unparsable map[string]error) {
	for _, pol := range policies {
		ok, err := Selects(&pol, nsLabels)
		if err != nil {
			if unparsable == nil {
				unparsable = map[string]error{}
			}
			unparsable[pol.Name] = err
			ok = true
		}
		if ok {
			selected = append(selected, pol)
		}
	}
	return selected, unparsable
}

// Input is what a plan is judged on.
type Input struct {
	// PlanJSON is the plan Secret's runnerapi.PlanJSONKey.
	PlanJSON []byte
	// Summary is the plan's record counts (runnerapi.PlanRecord): the JSON plan must list
	// every change it counts.
	Summary runnerapi.PlanSummary
	// Object is the object as an unstructured map.
	Object map[string]any
	// Namespace and NamespaceLabels are the object's namespace.
	Namespace       string
	NamespaceLabels map[string]string
	// RuleTimeout bounds each rule's evaluation; zero means RuleTimeout.
	RuleTimeout time.Duration
}

// Judge evaluates every rule of the policies (sorted by name) on the plan and returns the
// violations, as "<policy>/<rule>: <message>", at most infrav1.MaxPlanViolations, each at most
// infrav1.MaxPlanViolationBytes (the last says how many more were left out). No violation:
// the plan keeps every rule.
func Judge(ctx context.Context, policies []infrav1.TerraformPlanPolicy, in Input) []string {
	if len(policies) == 0 {
		return nil
	}
	policies = slices.Clone(policies)
	slices.SortFunc(policies, func(a, b infrav1.TerraformPlanPolicy) int { return strings.Compare(a.Name, b.Name) })
	vars, err := variables(in)
	var out []string
	for _, p := range policies {
		if err != nil {
			out = append(out, fmt.Sprintf("%s: the plan cannot be judged: %v", p.Name, err))
			continue
		}
		for _, r := range p.Spec.Rules {
			if v := judgeRule(ctx, r, vars, cmp.Or(in.RuleTimeout, RuleTimeout)); v != "" {
				out = append(out, fmt.Sprintf("%s/%s: %s", p.Name, r.Name, v))
			}
		}
	}
	return bound(out)
}

// judgeRule is "" when the rule holds, else why not.
func judgeRule(ctx context.Context, r infrav1.PlanPolicyRule, vars map[string]any, timeout time.Duration) string {
	msg := r.Message
	if msg == "" {
		msg = "the plan breaks " + r.Expression
	}
	prg, err := Compile(r.Expression)
	if err != nil {
		return fmt.Sprintf("the rule does not compile (%v); %s", err, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	val, _, err := prg.ContextEval(ctx, vars)
	if ctx.Err() != nil {
		return fmt.Sprintf("the rule ran over its time budget of %s; %s", timeout, msg)
	}
	if err != nil {
		return fmt.Sprintf("the rule failed (%v); %s", err, msg)
	}
	ok, isBool := val.Value().(bool)
	switch {
	case !isBool:
		return fmt.Sprintf("the rule returned %v, not a bool; %s", val.Value(), msg)
	case !ok:
		return msg
	}
	return ""
}

// variables builds the rules' variables from the input: an error when the JSON plan cannot be
// read, does not list every change the record counts, or has more than MaxChanges changes.
func variables(in Input) (map[string]any, error) {
	var plan map[string]any
	dec := json.NewDecoder(bytes.NewReader(in.PlanJSON))
	if err := dec.Decode(&plan); err != nil {
		return nil, fmt.Errorf("its JSON plan is not readable: %w", err)
	}
	var changes []any
	sum := map[string]int64{runnerapi.ActionCreate: 0, runnerapi.ActionUpdate: 0, runnerapi.ActionReplace: 0, runnerapi.ActionDelete: 0, runnerapi.ActionForget: 0}
	list, _ := plan["resource_changes"].([]any)
	for _, rc := range list {
		m, _ := rc.(map[string]any)
		ch, _ := m["change"].(map[string]any)
		actions := stringsOf(ch["actions"])
		action := runnerapi.ActionOf(actions)
		if action == "" {
			continue
		}
		sum[action]++
		changes = append(changes, map[string]any{
			"address": m["address"], "module": orEmpty(m["module_address"]), "mode": m["mode"], "type": m["type"], "name": m["name"],
			"provider": m["provider_name"], "action": action, "actions": actions, "before": ch["before"], "after": ch["after"],
		})
	}
	var total int64
	for _, n := range sum {
		total += n
	}
	// An import is counted by the record whatever its action (often no-op), and by no action
	// here: the JSON plan must list the changes the record counts by their action.
	if int(total) != in.Summary.Actions() {
		why := ""
		if tr, ok := plan[runnerapi.PlanJSONTruncatedKey].(map[string]any); ok {
			why = fmt.Sprintf(" (%v)", tr["reason"])
		}
		return nil, fmt.Errorf("its JSON plan lists %d of the plan's %d changes%s", total, in.Summary.Actions(), why)
	}
	if len(changes) > MaxChanges {
		return nil, fmt.Errorf("it has %d changes; policies judge at most %d", len(changes), MaxChanges)
	}
	if changes == nil {
		changes = []any{}
	}
	for _, k := range []string{"resource_changes", "resource_drift"} {
		if _, ok := plan[k]; !ok {
			plan[k] = []any{}
		}
	}
	for _, k := range []string{"variables", "output_changes"} {
		if _, ok := plan[k]; !ok {
			plan[k] = map[string]any{}
		}
	}
	nsLabels := map[string]any{}
	for k, v := range in.NamespaceLabels {
		nsLabels[k] = v
	}
	summary := map[string]int64{"total": total}
	for k, v := range sum {
		summary[k] = v
	}
	obj := in.Object
	if obj == nil {
		return nil, errors.New("the object is missing")
	}
	return map[string]any{
		VarPlan: plan, VarChanges: changes, VarSummary: summary, VarObject: obj,
		VarNamespace: map[string]any{"name": in.Namespace, "labels": nsLabels},
	}, nil
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// bound cuts the violations to infrav1.MaxPlanViolations and each to MaxPlanViolationBytes.
func bound(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(v), infrav1.MaxPlanViolations))
	for i, s := range v {
		if i == infrav1.MaxPlanViolations-1 && len(v) > infrav1.MaxPlanViolations {
			out = append(out, fmt.Sprintf("and %d more violations", len(v)-i))
			break
		}
		if len(s) > infrav1.MaxPlanViolationBytes {
			s = strings.ToValidUTF8(s[:infrav1.MaxPlanViolationBytes-3], "") + "..."
		}
		out = append(out, s)
	}
	return out
}
