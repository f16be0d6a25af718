package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// showJSONDoc is a `show -json` document with sensitive values at every depth terraform marks
// them: a whole value, an object's attribute, a list element, a nested block, an output and a
// variable; "plain" values are not sensitive.
const showJSONDoc = `{
  "format_version": "1.2",
  "terraform_version": "1.10.0",
  "variables": {"token": {"value": "var-secret"}, "region": {"value": "plain-region"}},
  "planned_values": {"outputs": {"pw": {"sensitive": true, "value": "planned-secret"}}},
  "prior_state": {"values": {"outputs": {"pw": {"sensitive": true, "value": "prior-secret"}}}},
  "configuration": {"root_module": {"variables": {"token": {"sensitive": true}, "region": {}},
    "resources": [{"expressions": {"password": {"constant_value": "config-secret"}}}]}},
  "resource_changes": [
    {"address": "db.main", "type": "db", "mode": "managed", "name": "main", "change": {
      "actions": ["delete", "create"],
      "before": {"password": "before-secret", "name": "plain-name", "tags": ["plain-tag", "tag-secret"], "block": [{"key": "block-secret", "id": 7}]},
      "after": {"password": "after-secret", "name": "plain-name", "tags": ["plain-tag", "tag-secret2"], "block": [{"key": "block-secret2", "id": 7}]},
      "before_sensitive": {"password": true, "tags": [false, true], "block": [{"key": true}]},
      "after_sensitive": {"password": true, "tags": [false, true], "block": [{"key": true}]},
      "generated_config": "password = \"generated-secret\""}},
    {"address": "whole.x", "type": "whole", "change": {"actions": ["create"], "before": null, "after": {"k": "whole-secret"}, "before_sensitive": false, "after_sensitive": true}}
  ],
  "resource_drift": [
    {"address": "db.main", "change": {"actions": ["update"], "before": {"password": "drift-secret"}, "after": {"password": "drift-secret2"},
      "before_sensitive": {"password": true}, "after_sensitive": {"password": true}}}
  ],
  "output_changes": {
    "pw": {"actions": ["update"], "before": "out-secret", "after": "out-secret2", "before_sensitive": true, "after_sensitive": true},
    "endpoint": {"actions": ["no-op"], "before": "plain-endpoint", "after": "plain-endpoint", "before_sensitive": false, "after_sensitive": false}
  }
}`

func TestMaskPlanJSONMasksEverySensitiveValue(t *testing.T) {
	r := NewRedactor([]string{"plain-region-is-redacted-too"})
	got, err := MaskPlanJSON([]byte(showJSONDoc), r.Redact, runnerapi.MaxPlanJSONBytes)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "secret") {
		t.Fatalf("the JSON plan holds a sensitive value:\n%s", got)
	}
	for _, plain := range []string{"plain-name", "plain-tag", "plain-endpoint", "plain-region", `"id":7`} {
		if !strings.Contains(string(got), plain) {
			t.Errorf("the JSON plan lost %s, which is not sensitive:\n%s", plain, got)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"planned_values", "prior_state", "configuration"} {
		if _, ok := doc[gone]; ok {
			t.Errorf("the JSON plan keeps %s", gone)
		}
	}
	if _, ok := doc[runnerapi.PlanJSONTruncatedKey]; ok {
		t.Errorf("a plan that fits is marked truncated")
	}
	tags := doc["resource_changes"].([]any)[0].(map[string]any)["change"].(map[string]any)["after"].(map[string]any)["tags"].([]any)
	if fmt.Sprint(tags) != "[plain-tag "+runnerapi.SensitiveValue+"]" {
		t.Errorf("tags = %v: only the marked element is masked", tags)
	}
}

func TestMaskPlanJSONRedactsStringsAndKeys(t *testing.T) {
	doc := `{"resource_changes": [{"address": "x.y[\"key-hunter2-key\"]", "change": {"actions": ["create"], "after": {"m": {"key-hunter2-key": "v-hunter2"}}, "after_sensitive": {}}}]}`
	got, err := MaskPlanJSON([]byte(doc), NewRedactor([]string{"hunter2"}).Redact, runnerapi.MaxPlanJSONBytes)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "hunter2") || !strings.Contains(string(got), "key-"+Mask+"-key") {
		t.Fatalf("a redact.json value was not masked in keys and values:\n%s", got)
	}
}

func TestMaskPlanJSONCutsToTheBound(t *testing.T) {
	var changes []string
	for i := range 300 {
		changes = append(changes, fmt.Sprintf(`{"address": "big.r[%d]", "type": "big", "change": {"actions": ["create"], "after": {"blob": %q}, "after_sensitive": {}}}`,
			i, strings.Repeat("x", 200)))
	}
	doc := `{"format_version": "1.2", "variables": {"v": {"value": "val"}}, "resource_changes": [` + strings.Join(changes, ",") + `]}`
	for _, tc := range []struct {
		limit      int
		kept       int
		allChanges bool
	}{
		{limit: 1 << 20, kept: 300, allChanges: true},
		{limit: 40 << 10, kept: 300, allChanges: true},
		{limit: 8 << 10, allChanges: false},
	} {
		got, err := MaskPlanJSON([]byte(doc), NewRedactor(nil).Redact, tc.limit)
		if err != nil {
			t.Fatalf("limit %d: %v", tc.limit, err)
		}
		if len(got) > tc.limit {
			t.Errorf("limit %d: %d bytes", tc.limit, len(got))
		}
		var out struct {
			Truncated       *runnerapi.PlanJSONTruncation `json:"captf_truncated"`
			Variables       map[string]any                `json:"variables"`
			ResourceChanges []map[string]any              `json:"resource_changes"`
		}
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("limit %d: not JSON: %v", tc.limit, err)
		}
		if tc.limit == 1<<20 {
			if out.Truncated != nil || out.Variables == nil || len(out.ResourceChanges) != 300 {
				t.Errorf("a plan that fits was cut: %+v", out.Truncated)
			}
			continue
		}
		if out.Truncated == nil || !out.Truncated.Values || out.Truncated.ResourceChanges != 300 || out.Truncated.Reason == "" {
			t.Fatalf("limit %d: the cut is not said: %+v", tc.limit, out.Truncated)
		}
		if out.Variables != nil || strings.Contains(string(got), "xxxx") {
			t.Errorf("limit %d: values kept in a cut plan", tc.limit)
		}
		if out.Truncated.KeptChanges != len(out.ResourceChanges) {
			t.Errorf("limit %d: says %d kept, lists %d", tc.limit, out.Truncated.KeptChanges, len(out.ResourceChanges))
		}
		if tc.allChanges != (len(out.ResourceChanges) == 300) {
			t.Errorf("limit %d: %d of 300 changes kept", tc.limit, len(out.ResourceChanges))
		}
		if !tc.allChanges && (len(out.ResourceChanges) == 0 || !strings.Contains(out.Truncated.Reason, "of 300 resource changes")) {
			t.Errorf("limit %d: %d changes kept, reason %q", tc.limit, len(out.ResourceChanges), out.Truncated.Reason)
		}
	}
}

// showJSONHealth is part of terraform 1.11's `show -json` of a drift check's plan after the
// module's health output turned false (planned_values holds the outputs as the plan evaluated
// them; output_changes the change).
const showJSONHealth = `{"format_version":"1.2","planned_values":{"outputs":{
  "health":{"sensitive":false,"type":["object",{"healthy":"bool","message":"string"}],"value":{"healthy":false,"message":"sick file token-123"}},
  "provider_id":{"sensitive":false,"type":"string","value":"sandbox://d9896970"}}},
  "output_changes":{"health":{"actions":["update"],"before":{"healthy":true,"message":"ok"},"after":{"healthy":false,"message":"sick file token-123"}}}}`

// A drift check reports the health output as its plan evaluated it, masked; none when the
// module has no such output or its value is unknown; a bad value as Invalid.
func TestHealthOf(t *testing.T) {
	redact := func(s string) string { return strings.ReplaceAll(s, "token-123", "***") }
	got := HealthOf([]byte(showJSONHealth), redact)
	if got == nil || got.Healthy || got.Message != "sick file ***" || got.Invalid != "" {
		t.Fatalf("HealthOf: %+v", got)
	}
	for _, doc := range []string{
		`{"planned_values":{"outputs":{"provider_id":{"value":"x"}}}}`,
		`{"planned_values":{"outputs":{"health":{"sensitive":false}}}}`, // unknown until apply
		`{}`, `not json`,
	} {
		if h := HealthOf([]byte(doc), redact); h != nil {
			t.Errorf("%s: got %+v, want no sample", doc, h)
		}
	}
	if h := HealthOf([]byte(`{"planned_values":{"outputs":{"health":{"sensitive":true}}}}`), redact); h == nil || !strings.Contains(h.Invalid, "sensitive") {
		t.Errorf("a sensitive health output: %+v", h)
	}
	if h := HealthOf([]byte(`{"planned_values":{"outputs":{"health":{"value":"up"}}}}`), redact); h == nil || h.Invalid == "" {
		t.Errorf("a string health output: %+v", h)
	}
}
