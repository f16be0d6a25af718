package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// StateFormatVersion is the only Terraform/OpenTofu state format version this package reads
// (Terraform 0.12 and later, every OpenTofu release).
const StateFormatVersion = 4

// State is the part of a Terraform state CAPTF needs: its identity, the root module's outputs
// and a summary of its resources. It prints no output values.
type State struct {
	// Version is the state format version (always StateFormatVersion).
	Version int
	// TerraformVersion is the version of terraform or tofu that wrote the state.
	TerraformVersion string
	// Serial and Lineage identify the state revision.
	Serial  uint64
	Lineage string
	// Outputs are the root module's outputs, by name.
	Outputs map[string]Output
	// Resources summarises the resources in the state (addresses and instance counts, no
	// attributes).
	Resources []Resource
	// MarkedForDeletion: the Secret it was read from has a deletionTimestamp (someone deleted
	// it, and the protection finalizer keeps it). The state is still the object's and is read
	// and written as before; the engine says so with an event (docs/state.md, Protection).
	MarkedForDeletion bool

	raw []byte
}

// Resource summarises one resource of the state.
type Resource struct {
	// Module is the module address ("" for the root module).
	Module string
	// Mode is "managed" or "data".
	Mode string
	// Type and Name form the resource's address.
	Type string
	Name string
	// Provider is the provider configuration address as the state records it (for example
	// provider["registry.terraform.io/hashicorp/null"]).
	Provider string
	// Instances is the number of instance objects recorded (a deposed object counts).
	Instances int

	// keys are the instance keys of the instance objects, in state order: nil for an instance
	// without count or for_each, else the index_key JSON (a number or a string).
	keys []json.RawMessage
}

// Output is one root module output. Its value is kept private so it cannot be copied into a
// status, an event or a log line by accident: use Value, which refuses sensitive outputs.
type Output struct {
	// Type is the output's type as Terraform records it (JSON).
	Type json.RawMessage
	// Sensitive is true for an output declared sensitive.
	Sensitive bool

	value json.RawMessage
}

// ErrSensitive is returned by Output.Value for a sensitive output.
var ErrSensitive = errors.New("output is sensitive")

// Value returns the output's value as compact JSON, or ErrSensitive for a sensitive output.
func (o Output) Value() (json.RawMessage, error) {
	if o.Sensitive {
		return nil, ErrSensitive
	}
	return o.value, nil
}

// String describes the output without its value.
func (o Output) String() string {
	if o.Sensitive {
		return "output(sensitive)"
	}
	return fmt.Sprintf("output(%d bytes)", len(o.value))
}

// GoString describes the output without its value (for %#v).
func (o Output) GoString() string { return o.String() }

// Bytes returns the whole state JSON as read (uncompressed), sensitive values included: for
// backups and restores only. Do not modify it.
func (s *State) Bytes() []byte { return s.raw }

// String describes the state without any value. It has a value receiver so that printing a
// State or a *State never falls back to printing the raw state.
func (s State) String() string {
	return fmt.Sprintf("state(serial %d, lineage %s, %d outputs, %d resources)", s.Serial, s.Lineage, len(s.Outputs), len(s.Resources))
}

// GoString describes the state without any value (for %#v).
func (s State) GoString() string { return s.String() }

// OutputNames returns the names of the outputs, sorted.
func (s *State) OutputNames() []string {
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.Outputs))
	for n := range s.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// StateEmpty reports whether the state records no infrastructure: no instance of a managed
// resource is left. Data sources do not count; a resource of any other, unknown mode does, so
// an unexpected state is never called empty. A nil state (no state Secret) is empty. The engine
// uses it after a successful destroy as the evidence that the state may go.
func StateEmpty(s *State) bool {
	if s == nil {
		return true
	}
	for _, r := range s.Resources {
		if r.Mode == "data" {
			continue
		}
		if r.Mode == "managed" && r.Instances == 0 {
			continue
		}
		return false
	}
	return true
}

type rawState struct {
	Version          *int                 `json:"version"`
	TerraformVersion string               `json:"terraform_version"`
	Serial           uint64               `json:"serial"`
	Lineage          string               `json:"lineage"`
	Outputs          map[string]rawOutput `json:"outputs"`
	Resources        []rawResource        `json:"resources"`
	EncryptedData    json.RawMessage      `json:"encrypted_data"`
}

type rawOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

type rawResource struct {
	Module    string        `json:"module"`
	Mode      string        `json:"mode"`
	Type      string        `json:"type"`
	Name      string        `json:"name"`
	Provider  string        `json:"provider"`
	Instances []rawInstance `json:"instances"`
}

// rawInstance is the part of an instance object CAPTF reads: its key, never its attributes.
type rawInstance struct {
	IndexKey json.RawMessage `json:"index_key"`
}

// Parse reads state JSON (uncompressed). Errors are *StateError without a Secret name.
func Parse(stateJSON []byte) (*State, error) {
	dec := json.NewDecoder(bytes.NewReader(stateJSON))
	var rs rawState
	if err := dec.Decode(&rs); err != nil {
		return nil, stateErr("", ReasonStateCorrupt, err, "the state is not valid state JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, stateErr("", ReasonStateCorrupt, nil, "the state has data after its JSON document")
	}
	if len(rs.EncryptedData) > 0 {
		return nil, stateErr("", ReasonStateEncrypted, nil,
			"the state is encrypted (OpenTofu state encryption); CAPTF reads outputs from the state and cannot decrypt it, so disable encryption for this module's state")
	}
	if rs.Version == nil {
		return nil, stateErr("", ReasonStateCorrupt, nil, "the state has no format version")
	}
	if *rs.Version != StateFormatVersion {
		return nil, stateErr("", ReasonStateVersionUnsupported, nil, "the state has format version %d; only version %d is supported", *rs.Version, StateFormatVersion)
	}
	s := &State{
		Version:          *rs.Version,
		TerraformVersion: rs.TerraformVersion,
		Serial:           rs.Serial,
		Lineage:          rs.Lineage,
		Outputs:          make(map[string]Output, len(rs.Outputs)),
		raw:              stateJSON,
	}
	for name, o := range rs.Outputs {
		value := []byte("null")
		if len(o.Value) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, o.Value); err != nil {
				return nil, stateErr("", ReasonStateCorrupt, err, "the value of output %q is not JSON", name)
			}
			value = buf.Bytes()
		}
		s.Outputs[name] = Output{Type: o.Type, Sensitive: o.Sensitive, value: value}
	}
	for _, r := range rs.Resources {
		res := Resource{Module: r.Module, Mode: r.Mode, Type: r.Type, Name: r.Name, Provider: r.Provider, Instances: len(r.Instances)}
		for _, in := range r.Instances {
			res.keys = append(res.keys, in.IndexKey)
		}
		s.Resources = append(s.Resources, res)
	}
	return s, nil
}
