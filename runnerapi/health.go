package runnerapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// HealthOutput is the name of the optional module output that reports the infrastructure's
// health (TerraformMachine; docs/module-contract.md).
const HealthOutput = "health"

// MaxHealthMessage bounds the health output's message, in bytes.
const MaxHealthMessage = 256

// HealthSample is one reading of a module's health output: after an apply (from the state) or
// after a drift check (from the plan, where terraform evaluates the outputs again).
type HealthSample struct {
	// Healthy is what the module said.
	Healthy bool `json:"healthy"`
	// Message is the module's reason, at most MaxHealthMessage bytes.
	Message string `json:"message,omitempty"`
	// Invalid says why the output does not fit the contract (Healthy and Message are then
	// meaningless): the sample is not counted.
	Invalid string `json:"invalid,omitempty"`
}

// ParseHealth reads the value of the health output: a bool, or an object
// {healthy = bool, message = string} (message optional, at most MaxHealthMessage bytes). A
// sensitive output, any other shape, an unknown attribute or a longer message gives a sample
// whose Invalid says what is wrong; it never fails otherwise.
func ParseHealth(value json.RawMessage, sensitive bool) HealthSample {
	if sensitive {
		return HealthSample{Invalid: fmt.Sprintf("output %q is marked sensitive; its message is copied into the object's status, so it must not be", HealthOutput)}
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return HealthSample{Invalid: fmt.Sprintf("output %q: the value is not JSON", HealthOutput)}
	}
	switch t := v.(type) {
	case bool:
		return HealthSample{Healthy: t}
	case map[string]any:
		for k := range t {
			if k != "healthy" && k != "message" {
				return HealthSample{Invalid: fmt.Sprintf("output %q has the unexpected attribute %q; allowed: healthy, message", HealthOutput, cutString(k, 64))}
			}
		}
		h, ok := t["healthy"].(bool)
		if !ok {
			return HealthSample{Invalid: fmt.Sprintf("output %q: healthy must be a bool", HealthOutput)}
		}
		s := HealthSample{Healthy: h}
		switch m := t["message"].(type) {
		case nil:
		case string:
			if len(m) > MaxHealthMessage || !utf8.ValidString(m) {
				return HealthSample{Invalid: fmt.Sprintf("output %q: message must be UTF-8 text of at most %d bytes, got %d bytes", HealthOutput, MaxHealthMessage, len(m))}
			}
			s.Message = m
		default:
			return HealthSample{Invalid: fmt.Sprintf("output %q: message must be a string", HealthOutput)}
		}
		return s
	case nil:
		return HealthSample{Invalid: fmt.Sprintf("output %q is null; expected a bool or {healthy = bool, message = string}", HealthOutput)}
	}
	return HealthSample{Invalid: fmt.Sprintf("output %q must be a bool or an object {healthy = bool, message = string}", HealthOutput)}
}

// Bounded returns s with its message and reason cut to MaxHealthMessage bytes, so a result
// that carries it stays within MaxResultBytes.
func (s HealthSample) Bounded() HealthSample {
	s.Message = cutString(s.Message, MaxHealthMessage)
	s.Invalid = cutString(s.Invalid, MaxHealthMessage)
	return s
}

func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
