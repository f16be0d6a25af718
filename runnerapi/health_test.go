package runnerapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The health output's shapes (docs/module-contract.md): a bool, or {healthy, message}; every
// other value is a sample whose Invalid says why, never a panic.
func TestParseHealth(t *testing.T) {
	long := strings.Repeat("x", runnerapi.MaxHealthMessage+1)
	for _, c := range []struct {
		value     string
		sensitive bool
		want      runnerapi.HealthSample
		invalid   string
	}{
		{value: `true`, want: runnerapi.HealthSample{Healthy: true}},
		{value: `false`, want: runnerapi.HealthSample{Healthy: false}},
		{value: `{"healthy": true}`, want: runnerapi.HealthSample{Healthy: true}},
		{value: `{"healthy": false, "message": "disk full"}`, want: runnerapi.HealthSample{Message: "disk full"}},
		{value: `{"healthy": false, "message": null}`, want: runnerapi.HealthSample{}},
		{value: `{"healthy": true, "message": "` + long[:runnerapi.MaxHealthMessage] + `"}`, want: runnerapi.HealthSample{Healthy: true, Message: long[:runnerapi.MaxHealthMessage]}},
		{value: `true`, sensitive: true, invalid: "sensitive"},
		{value: `null`, invalid: "is null"},
		{value: `"true"`, invalid: "must be a bool or an object"},
		{value: `1`, invalid: "must be a bool or an object"},
		{value: `[true]`, invalid: "must be a bool or an object"},
		{value: `{}`, invalid: "healthy must be a bool"},
		{value: `{"healthy": "yes"}`, invalid: "healthy must be a bool"},
		{value: `{"healthy": true, "message": 3}`, invalid: "message must be a string"},
		{value: `{"healthy": true, "message": "` + long + `"}`, invalid: "at most 256 bytes"},
		{value: `{"healthy": true, "reason": "x"}`, invalid: `unexpected attribute "reason"`},
		{value: `{not json`, invalid: "not JSON"},
	} {
		got := runnerapi.ParseHealth(json.RawMessage(c.value), c.sensitive)
		if c.invalid != "" {
			if !strings.Contains(got.Invalid, c.invalid) || !strings.Contains(got.Invalid, `"health"`) {
				t.Errorf("%s (sensitive %v): Invalid %q, want it to name the output and say %q", c.value, c.sensitive, got.Invalid, c.invalid)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.value, got, c.want)
		}
	}
}

// A result carrying a health sample of the longest message stays within MaxResultBytes.
func TestEncodeBoundsTheHealthSample(t *testing.T) {
	drift := true
	r := runnerapi.Result{Operation: runnerapi.OperationDrift, Outcome: runnerapi.OutcomeSucceeded, Drift: &drift,
		Health: &runnerapi.HealthSample{Message: strings.Repeat("é", 400), Invalid: strings.Repeat("y", 1000)},
		Error:  strings.Repeat("e", 5000)}
	b := runnerapi.Encode(r)
	if len(b) > runnerapi.MaxResultBytes {
		t.Fatalf("encoded %d bytes, over %d", len(b), runnerapi.MaxResultBytes)
	}
	back, err := runnerapi.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Health == nil || len(back.Health.Message) > runnerapi.MaxHealthMessage || len(back.Health.Invalid) > runnerapi.MaxHealthMessage ||
		!strings.HasPrefix(back.Health.Message, "é") {
		t.Fatalf("health after the round trip: %+v", back.Health)
	}
}
