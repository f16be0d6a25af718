package runner

// The machine-readable plan (runnerapi.PlanJSONKey): terraform's `show -json` of the saved plan,
// with every sensitive value masked, redact.json values masked, and bounded in size.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// MaskPlanJSON turns the `show -json` document of a plan into the JSON plan the plan Secret
// keeps:
//   - only the top-level keys of runnerapi.PlanJSONKeptKeys stay;
//   - a variable the root module declares sensitive has runnerapi.SensitiveValue as its value;
//   - in resource_changes, resource_drift and output_changes, every before or after value (or
//     part of one) that before_sensitive or after_sensitive marks becomes SensitiveValue, and
//     generated_config goes;
//   - redact masks every string, object keys included;
//   - a document over limit bytes is cut (cutPlanJSON), and says so under
//     runnerapi.PlanJSONTruncatedKey.
func MaskPlanJSON(showJSON []byte, redact func(string) string, limit int) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(showJSON))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the plan's JSON: %w", err)
	}
	sensitiveVars := declaredSensitive(doc)
	out := map[string]any{}
	for _, k := range keptPlanKeys {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	if vars, ok := out["variables"].(map[string]any); ok {
		for name, v := range vars {
			if sensitiveVars[name] {
				vars[name] = map[string]any{"value": runnerapi.SensitiveValue}
			} else {
				vars[name] = v
			}
		}
	}
	for _, key := range []string{"resource_changes", "resource_drift"} {
		list, _ := out[key].([]any)
		for _, rc := range list {
			if m, ok := rc.(map[string]any); ok {
				if ch, ok := m["change"].(map[string]any); ok {
					maskChange(ch)
				}
			}
		}
	}
	if outs, ok := out["output_changes"].(map[string]any); ok {
		for _, oc := range outs {
			if ch, ok := oc.(map[string]any); ok {
				maskChange(ch)
			}
		}
	}
	masked := redactStrings(out, redact)
	b, err := json.Marshal(masked)
	if err != nil {
		return nil, fmt.Errorf("encode the JSON plan: %w", err)
	}
	if len(b) <= limit {
		return b, nil
	}
	return cutPlanJSON(masked.(map[string]any), len(b), limit)
}

// declaredSensitive names the root module's variables declared sensitive.
func declaredSensitive(doc map[string]any) map[string]bool {
	out := map[string]bool{}
	cfg, _ := doc["configuration"].(map[string]any)
	root, _ := cfg["root_module"].(map[string]any)
	vars, _ := root["variables"].(map[string]any)
	for name, v := range vars {
		if m, ok := v.(map[string]any); ok && m["sensitive"] == true {
			out[name] = true
		}
	}
	return out
}

// maskChange masks a change's before and after values by its sensitivity markers, and drops
// the configuration terraform generates for an import (it may hold any attribute).
func maskChange(ch map[string]any) {
	if v, ok := ch["before"]; ok {
		ch["before"] = maskValue(v, ch["before_sensitive"])
	}
	if v, ok := ch["after"]; ok {
		ch["after"] = maskValue(v, ch["after_sensitive"])
	}
	delete(ch, "generated_config")
}

// maskValue replaces what marker marks sensitive in v: marker is true for a sensitive value, or
// an object or array of the value's shape whose leaves say which parts are.
func maskValue(v, marker any) any {
	switch m := marker.(type) {
	case bool:
		if m && v != nil {
			return runnerapi.SensitiveValue
		}
	case map[string]any:
		if obj, ok := v.(map[string]any); ok {
			for k, mk := range m {
				if x, ok := obj[k]; ok {
					obj[k] = maskValue(x, mk)
				}
			}
		}
	case []any:
		if arr, ok := v.([]any); ok {
			for i := range min(len(arr), len(m)) {
				arr[i] = maskValue(arr[i], m[i])
			}
		}
	}
	return v
}

// redactStrings returns v with redact applied to every string and object key.
func redactStrings(v any, redact func(string) string) any {
	switch x := v.(type) {
	case string:
		return redact(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redact(k)] = redactStrings(e, redact)
		}
		return out
	case []any:
		for i := range x {
			x[i] = redactStrings(x[i], redact)
		}
	}
	return v
}

// cutPlanJSON fits a masked JSON plan of size bytes into limit: each resource change keeps only
// its address, module, mode, type, name, index, provider and actions (the variables, the values
// and the outputs' values go); if that is still too large, resource changes are left out from
// the end. The document says what was left out under runnerapi.PlanJSONTruncatedKey.
func cutPlanJSON(doc map[string]any, size, limit int) ([]byte, error) {
	changes, _ := doc["resource_changes"].([]any)
	slim := map[string]any{}
	for _, k := range []string{"format_version", "terraform_version", "applyable", "complete", "errored", "timestamp"} {
		if v, ok := doc[k]; ok {
			slim[k] = v
		}
	}
	slimChanges := make([]any, 0, len(changes))
	for _, rc := range changes {
		slimChanges = append(slimChanges, slimChange(rc))
	}
	if outs, ok := doc["output_changes"].(map[string]any); ok {
		so := map[string]any{}
		for name, oc := range outs {
			m, _ := oc.(map[string]any)
			so[name] = map[string]any{"actions": m["actions"]}
		}
		slim["output_changes"] = so
	}
	tr := runnerapi.PlanJSONTruncation{Bytes: size, Values: true, ResourceChanges: len(changes)}
	// Leave changes out from the end until the document fits; the first try keeps all.
	for keep := len(slimChanges); keep >= 0; {
		tr.KeptChanges = keep
		tr.Reason = truncationReason(tr, limit)
		slim["resource_changes"] = slimChanges[:keep]
		slim[runnerapi.PlanJSONTruncatedKey] = tr
		b, err := json.Marshal(slim)
		if err != nil {
			return nil, fmt.Errorf("encode the cut JSON plan: %w", err)
		}
		if len(b) <= limit {
			return b, nil
		}
		if keep == 0 {
			return nil, fmt.Errorf("the JSON plan does not fit %d bytes even without its changes", limit)
		}
		// Cut in proportion to the excess, by at least one change.
		keep -= max(1, keep*(len(b)-limit)/len(b)+1)
		keep = max(keep, 0)
	}
	return nil, fmt.Errorf("the JSON plan does not fit %d bytes", limit)
}

func slimChange(rc any) any {
	m, ok := rc.(map[string]any)
	if !ok {
		return rc
	}
	out := map[string]any{}
	for _, k := range []string{"address", "module_address", "mode", "type", "name", "index", "provider_name", "action_reason"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	if ch, ok := m["change"].(map[string]any); ok {
		out["change"] = map[string]any{"actions": ch["actions"]}
	}
	return out
}

func truncationReason(tr runnerapi.PlanJSONTruncation, limit int) string {
	if tr.KeptChanges == tr.ResourceChanges {
		return fmt.Sprintf("the JSON plan was %d bytes, over the bound of %d: the variables and every before and after value were left out; "+
			"the plan file and plan.txt hold them", tr.Bytes, limit)
	}
	return fmt.Sprintf("the JSON plan was %d bytes, over the bound of %d: the variables and every before and after value were left out, "+
		"and %d of %d resource changes are listed; the plan file and plan.txt hold the whole plan", tr.Bytes, limit, tr.KeptChanges, tr.ResourceChanges)
}

// keptPlanKeys is runnerapi.PlanJSONKeptKeys, sorted for a stable walk.
var keptPlanKeys = func() []string {
	k := slices.Clone(runnerapi.PlanJSONKeptKeys)
	slices.Sort(k)
	return k
}()

// HealthOf reads the module's health output (runnerapi.HealthOutput) from the `show -json`
// document of a plan: planned_values.outputs holds every root output as the plan evaluated it,
// in a full plan and in a refresh-only one alike. nil: the module has no health output, or its
// value is not known until an apply (terraform omits an unknown value). The module's message is
// masked like every other text the runner reports.
func HealthOf(showJSON []byte, redact func(string) string) *runnerapi.HealthSample {
	var doc struct {
		PlannedValues struct {
			Outputs map[string]struct {
				Sensitive bool            `json:"sensitive"`
				Value     json.RawMessage `json:"value"`
			} `json:"outputs"`
		} `json:"planned_values"`
	}
	if err := json.Unmarshal(showJSON, &doc); err != nil {
		return nil
	}
	o, ok := doc.PlannedValues.Outputs[runnerapi.HealthOutput]
	if !ok || (len(o.Value) == 0 && !o.Sensitive) {
		return nil
	}
	s := runnerapi.ParseHealth(o.Value, o.Sensitive)
	s.Message = redact(s.Message)
	return &s
}
