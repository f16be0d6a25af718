package state_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
)

// stateWith parses a state whose outputs are given as raw JSON values; a name prefixed "!" is
// sensitive.
func stateWith(t *testing.T, outputs map[string]string) *state.State {
	t.Helper()
	outs := map[string]any{}
	for name, v := range outputs {
		sensitive := strings.HasPrefix(name, "!")
		name = strings.TrimPrefix(name, "!")
		outs[name] = map[string]any{"value": json.RawMessage(v), "type": "dynamic", "sensitive": sensitive}
	}
	b, err := json.Marshal(map[string]any{"version": 4, "serial": 1, "lineage": "l", "outputs": outs, "resources": []any{}})
	if err != nil {
		t.Fatalf("build state: %v", err)
	}
	s, err := state.Parse(b)
	if err != nil {
		t.Fatalf("parse state: %v", err)
	}
	return s
}

type outcome struct {
	reason string // "" for success
	output string // the output the error names
	text   string // a fragment the message must contain
}

func ok() outcome { return outcome{} }

func bad(reason, output, text string) outcome {
	return outcome{reason: reason, output: output, text: text}
}

const (
	missing = infrav1.OutputMissingReason
	invalid = infrav1.OutputInvalidReason
)

func check(t *testing.T, err error, want outcome) {
	t.Helper()
	if want.reason == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	oe, isOE := state.AsOutputError(err)
	if !isOE {
		t.Fatalf("want an OutputError %s on %s, got %T %v", want.reason, want.output, err, err)
	}
	if oe.Reason != want.reason || oe.Output != want.output {
		t.Fatalf("want %s on %s, got %s on %s: %s", want.reason, want.output, oe.Reason, oe.Output, oe.Message)
	}
	if !strings.Contains(oe.Message, want.output) || !strings.Contains(oe.Message, want.text) {
		t.Fatalf("message %q must name %q and contain %q", oe.Message, want.output, want.text)
	}
}

func TestClusterOutputs(t *testing.T) {
	const ep = `{"host": "10.0.0.1", "port": 6443}`
	cases := []struct {
		name    string
		outputs map[string]string
		want    outcome
		result  *state.ClusterOutputs
	}{
		{name: "endpoint only", outputs: map[string]string{"control_plane_endpoint": ep}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}}},
		{name: "port as string", outputs: map[string]string{"control_plane_endpoint": `{"host": "api.example.com", "port": "443"}`}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "api.example.com", Port: 443}}},
		{name: "port as whole float", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": 6443.0}`}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "h", Port: 6443}}},
		{name: "no outputs", outputs: map[string]string{}, want: bad(missing, "control_plane_endpoint", "host = string, port = number")},
		{name: "null endpoint", outputs: map[string]string{"control_plane_endpoint": `null`}, want: bad(missing, "control_plane_endpoint", "is null")},
		{name: "endpoint a string", outputs: map[string]string{"control_plane_endpoint": `"10.0.0.1:6443"`}, want: bad(invalid, "control_plane_endpoint", "must be an object")},
		{name: "empty host", outputs: map[string]string{"control_plane_endpoint": `{"host": "", "port": 6443}`}, want: bad(invalid, "control_plane_endpoint", "host must be a non-empty string")},
		{name: "host missing", outputs: map[string]string{"control_plane_endpoint": `{"port": 6443}`}, want: bad(invalid, "control_plane_endpoint", "host must be")},
		{name: "host with scheme", outputs: map[string]string{"control_plane_endpoint": `{"host": "https://h", "port": 6443}`}, want: bad(invalid, "control_plane_endpoint", "without a scheme")},
		{name: "host too long", outputs: map[string]string{"control_plane_endpoint": fmt.Sprintf(`{"host": %q, "port": 6443}`, strings.Repeat("h", 513))}, want: bad(invalid, "control_plane_endpoint", "at most 512")},
		{name: "port zero", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": 0}`}, want: bad(invalid, "control_plane_endpoint", "1 to 65535")},
		{name: "port too high", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": 65536}`}, want: bad(invalid, "control_plane_endpoint", "1 to 65535")},
		{name: "port fractional", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": 6443.5}`}, want: bad(invalid, "control_plane_endpoint", "whole number")},
		{name: "port missing", outputs: map[string]string{"control_plane_endpoint": `{"host": "h"}`}, want: bad(invalid, "control_plane_endpoint", "got null")},
		{name: "port a word", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": "https"}`}, want: bad(invalid, "control_plane_endpoint", "1 to 65535")},
		{name: "unknown attribute", outputs: map[string]string{"control_plane_endpoint": `{"host": "h", "port": 1, "scheme": "https"}`}, want: bad(invalid, "control_plane_endpoint", `unexpected attribute "scheme"`)},
		{name: "sensitive endpoint", outputs: map[string]string{"!control_plane_endpoint": ep}, want: bad(invalid, "control_plane_endpoint", "sensitive")},

		{name: "failure domains as a map", outputs: map[string]string{"control_plane_endpoint": ep,
			"failure_domains": `{"zb": {"control_plane": false}, "za": {"control_plane": true, "attributes": {"region": "r1", "weight": 3, "ssd": true}}, "zc": {}}`}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}, FailureDomains: []clusterv1.FailureDomain{
				{Name: "za", ControlPlane: ptr.To(true), Attributes: map[string]string{"region": "r1", "weight": "3", "ssd": "true"}},
				{Name: "zb", ControlPlane: ptr.To(false)},
				{Name: "zc"},
			}}},
		{name: "failure domains as a list", outputs: map[string]string{"control_plane_endpoint": ep,
			"failure_domains": `[{"name": "zb"}, {"name": "za", "control_plane": true, "attributes": {"k": "v"}}]`}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}, FailureDomains: []clusterv1.FailureDomain{
				{Name: "za", ControlPlane: ptr.To(true), Attributes: map[string]string{"k": "v"}},
				{Name: "zb"},
			}}},
		{name: "failure domains null", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `null`}, want: ok(),
			result: &state.ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}}},
		{name: "failure domains a string", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `"za"`}, want: bad(invalid, "failure_domains", "must be a map")},
		{name: "failure domain list entry without name", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `[{"control_plane": true}]`}, want: bad(invalid, "failure_domains", "name must be a string")},
		{name: "failure domain empty name", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `[{"name": ""}]`}, want: bad(invalid, "failure_domains", "1 to 256")},
		{name: "failure domain duplicate", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `[{"name": "a"}, {"name": "a"}]`}, want: bad(invalid, "failure_domains", `"a" twice`)},
		{name: "failure domain control_plane not bool", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `{"a": {"control_plane": "yes"}}`}, want: bad(invalid, "failure_domains", "control_plane must be a bool")},
		{name: "failure domain camelCase typo", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `{"a": {"controlPlane": true}}`}, want: bad(invalid, "failure_domains", `unexpected attribute "controlPlane"`)},
		{name: "failure domain nested attribute", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `{"a": {"attributes": {"k": {"x": 1}}}}`}, want: bad(invalid, "failure_domains", `attribute "k"`)},
		{name: "failure domain attributes a list", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `{"a": {"attributes": ["x"]}}`}, want: bad(invalid, "failure_domains", "attributes must be a map")},
		{name: "failure domain entry a bool", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": `{"a": true}`}, want: bad(invalid, "failure_domains", "must be an object")},
		{name: "too many failure domains", outputs: map[string]string{"control_plane_endpoint": ep, "failure_domains": manyDomains(101)}, want: bad(invalid, "failure_domains", "at most 100")},
		{name: "sensitive failure domains", outputs: map[string]string{"control_plane_endpoint": ep, "!failure_domains": `{}`}, want: bad(invalid, "failure_domains", "sensitive")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := state.Cluster(stateWith(t, tc.outputs))
			check(t, err, tc.want)
			if tc.result != nil && !reflect.DeepEqual(got, tc.result) {
				t.Fatalf("got %+v\nwant %+v", got, tc.result)
			}
		})
	}
}

func manyDomains(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"name": "z%d"}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestMachineOutputs(t *testing.T) {
	const id = `"aws:///eu-west-1a/i-0123"`
	cases := []struct {
		name    string
		outputs map[string]string
		want    outcome
		result  *state.MachineOutputs
	}{
		{name: "provider id only", outputs: map[string]string{"provider_id": id}, want: ok(), result: &state.MachineOutputs{ProviderID: "aws:///eu-west-1a/i-0123"}},
		{name: "all outputs", outputs: map[string]string{"provider_id": id, "failure_domain": `"az1"`,
			"addresses": `[{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "node-1"}, {"type": "ExternalDNS", "address": "n1.example.com"}, {"type": "ExternalIP", "address": "1.2.3.4"}, {"type": "InternalDNS", "address": "n1.internal"}]`},
			want: ok(), result: &state.MachineOutputs{ProviderID: "aws:///eu-west-1a/i-0123", FailureDomain: "az1", Addresses: []clusterv1.MachineAddress{
				{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}, {Type: clusterv1.MachineHostName, Address: "node-1"},
				{Type: clusterv1.MachineExternalDNS, Address: "n1.example.com"}, {Type: clusterv1.MachineExternalIP, Address: "1.2.3.4"},
				{Type: clusterv1.MachineInternalDNS, Address: "n1.internal"},
			}}},
		{name: "null optionals", outputs: map[string]string{"provider_id": id, "addresses": `null`, "failure_domain": `null`}, want: ok(), result: &state.MachineOutputs{ProviderID: "aws:///eu-west-1a/i-0123"}},
		{name: "missing provider id", outputs: map[string]string{"addresses": `[]`}, want: bad(missing, "provider_id", "a non-empty string")},
		{name: "null provider id", outputs: map[string]string{"provider_id": `null`}, want: bad(missing, "provider_id", "is null")},
		{name: "empty provider id", outputs: map[string]string{"provider_id": `""`}, want: bad(invalid, "provider_id", "non-empty")},
		{name: "provider id with space", outputs: map[string]string{"provider_id": `"a b"`}, want: bad(invalid, "provider_id", "without spaces")},
		{name: "provider id a number", outputs: map[string]string{"provider_id": `42`}, want: bad(invalid, "provider_id", "must be a string, got the number 42")},
		{name: "provider id too long", outputs: map[string]string{"provider_id": `"` + strings.Repeat("x", 513) + `"`}, want: bad(invalid, "provider_id", "at most 512")},
		{name: "sensitive provider id", outputs: map[string]string{"!provider_id": id}, want: bad(invalid, "provider_id", "sensitive")},
		{name: "addresses an object", outputs: map[string]string{"provider_id": id, "addresses": `{"type": "InternalIP", "address": "x"}`}, want: bad(invalid, "addresses", "must be a list")},
		{name: "address of unknown type", outputs: map[string]string{"provider_id": id, "addresses": `[{"type": "PrivateIP", "address": "10.0.0.5"}]`}, want: bad(invalid, "addresses", "type must be one of")},
		{name: "address without type", outputs: map[string]string{"provider_id": id, "addresses": `[{"address": "10.0.0.5"}]`}, want: bad(invalid, "addresses", "type must be one of")},
		{name: "empty address", outputs: map[string]string{"provider_id": id, "addresses": `[{"type": "InternalIP", "address": ""}]`}, want: bad(invalid, "addresses", "non-empty string")},
		{name: "address a string", outputs: map[string]string{"provider_id": id, "addresses": `["10.0.0.5"]`}, want: bad(invalid, "addresses", "element 0 must be an object")},
		{name: "address extra attribute", outputs: map[string]string{"provider_id": id, "addresses": `[{"type": "InternalIP", "address": "x", "ipv6": false}]`}, want: bad(invalid, "addresses", `unexpected attribute "ipv6"`)},
		{name: "too many addresses", outputs: map[string]string{"provider_id": id, "addresses": manyAddresses(33)}, want: bad(invalid, "addresses", "at most 32")},
		{name: "sensitive addresses", outputs: map[string]string{"provider_id": id, "!addresses": `[]`}, want: bad(invalid, "addresses", "sensitive")},
		{name: "failure domain a list", outputs: map[string]string{"provider_id": id, "failure_domain": `["az1"]`}, want: bad(invalid, "failure_domain", "must be a string")},
		{name: "failure domain too long", outputs: map[string]string{"provider_id": id, "failure_domain": `"` + strings.Repeat("f", 257) + `"`}, want: bad(invalid, "failure_domain", "at most 256")},
		{name: "sensitive failure domain", outputs: map[string]string{"provider_id": id, "!failure_domain": `"az1"`}, want: bad(invalid, "failure_domain", "sensitive")},
		{name: "health a bool", outputs: map[string]string{"provider_id": id, "health": `false`}, want: ok(), result: &state.MachineOutputs{ProviderID: "aws:///eu-west-1a/i-0123"}},
		{name: "health an object", outputs: map[string]string{"provider_id": id, "health": `{"healthy": true, "message": "ok"}`}, want: ok()},
		{name: "health a string", outputs: map[string]string{"provider_id": id, "health": `"up"`}, want: bad(invalid, "health", "must be a bool or an object")},
		{name: "health without healthy", outputs: map[string]string{"provider_id": id, "health": `{"message": "ok"}`}, want: bad(invalid, "health", "healthy must be a bool")},
		{name: "health message too long", outputs: map[string]string{"provider_id": id, "health": `{"healthy": true, "message": "` + strings.Repeat("m", 257) + `"}`}, want: bad(invalid, "health", "at most 256 bytes")},
		{name: "sensitive health", outputs: map[string]string{"provider_id": id, "!health": `true`}, want: bad(invalid, "health", "sensitive")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := state.Machine(stateWith(t, tc.outputs))
			check(t, err, tc.want)
			if tc.result != nil && !reflect.DeepEqual(got, tc.result) {
				t.Fatalf("got %+v\nwant %+v", got, tc.result)
			}
		})
	}
}

// The health output as a sample: none without the output, the module's value otherwise, and a
// bad value as a sample whose Invalid says why.
func TestMachineHealth(t *testing.T) {
	if h := state.MachineHealth(nil); h != nil {
		t.Fatalf("nil state: %+v", h)
	}
	if h := state.MachineHealth(stateWith(t, map[string]string{"provider_id": `"x"`})); h != nil {
		t.Fatalf("no health output: %+v", h)
	}
	if h := state.MachineHealth(stateWith(t, map[string]string{"health": `{"healthy": false, "message": "disk full"}`})); h == nil || h.Healthy || h.Message != "disk full" {
		t.Fatalf("unhealthy: %+v", h)
	}
	if h := state.MachineHealth(stateWith(t, map[string]string{"health": `[]`})); h == nil || h.Invalid == "" {
		t.Fatalf("a list: %+v", h)
	}
}

func manyAddresses(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"type": "InternalIP", "address": "10.0.0.%d"}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestMachinePoolOutputs(t *testing.T) {
	cases := []struct {
		name    string
		outputs map[string]string
		want    outcome
		result  *state.MachinePoolOutputs
	}{
		{name: "list, replicas defaulted", outputs: map[string]string{"provider_id_list": `["p://a", "p://b"]`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{"p://a", "p://b"}, Replicas: 2}},
		{name: "explicit replicas", outputs: map[string]string{"provider_id_list": `["p://a"]`, "replicas": `3`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{"p://a"}, Replicas: 3}},
		{name: "empty list", outputs: map[string]string{"provider_id_list": `[]`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{}, Replicas: 0}},
		{name: "null replicas", outputs: map[string]string{"provider_id_list": `["p://a"]`, "replicas": `null`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{"p://a"}, Replicas: 1}},
		{name: "missing list", outputs: map[string]string{"replicas": `1`}, want: bad(missing, "provider_id_list", "a list of provider ID strings")},
		{name: "null list", outputs: map[string]string{"provider_id_list": `null`}, want: bad(missing, "provider_id_list", "is null")},
		{name: "list a string", outputs: map[string]string{"provider_id_list": `"p://a"`}, want: bad(invalid, "provider_id_list", "must be a list of strings")},
		{name: "list of numbers", outputs: map[string]string{"provider_id_list": `[1]`}, want: bad(invalid, "provider_id_list", "element 0 must be a string")},
		{name: "empty id", outputs: map[string]string{"provider_id_list": `["p://a", ""]`}, want: bad(invalid, "provider_id_list", "element 1")},
		{name: "duplicate id", outputs: map[string]string{"provider_id_list": `["p://a", "p://a"]`}, want: bad(invalid, "provider_id_list", "twice")},
		{name: "sensitive list", outputs: map[string]string{"!provider_id_list": `["p://a"]`}, want: bad(invalid, "provider_id_list", "sensitive")},
		{name: "negative replicas", outputs: map[string]string{"provider_id_list": `[]`, "replicas": `-1`}, want: bad(invalid, "replicas", "whole number from 0")},
		{name: "fractional replicas", outputs: map[string]string{"provider_id_list": `[]`, "replicas": `1.5`}, want: bad(invalid, "replicas", "whole number")},
		{name: "huge replicas", outputs: map[string]string{"provider_id_list": `[]`, "replicas": `4294967296`}, want: bad(invalid, "replicas", "whole number")},
		{name: "replicas a bool", outputs: map[string]string{"provider_id_list": `[]`, "replicas": `true`}, want: bad(invalid, "replicas", "got a bool")},
		{name: "sensitive replicas", outputs: map[string]string{"provider_id_list": `[]`, "!replicas": `1`}, want: bad(invalid, "replicas", "sensitive")},

		{name: "instances, in the module's order", outputs: map[string]string{"provider_id_list": `["p://a", "p://b", "p://c"]`,
			"instances": `[{"provider_id": "p://b", "ready": true}, {"provider_id": "p://a", "ready": false, "message": "booting"}, {"provider_id": "p://c", "ready": true, "message": null}]`},
			want: ok(), result: &state.MachinePoolOutputs{ProviderIDList: []string{"p://a", "p://b", "p://c"}, Replicas: 3,
				Instances: []infrav1.TerraformMachinePoolInstance{
					{ProviderID: "p://b", Ready: true}, {ProviderID: "p://a", Message: "booting"}, {ProviderID: "p://c", Ready: true},
				}, ReadyInstances: ptr.To[int32](2)}},
		{name: "no instances of an empty pool", outputs: map[string]string{"provider_id_list": `[]`, "instances": `[]`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{}, Instances: []infrav1.TerraformMachinePoolInstance{}, ReadyInstances: ptr.To[int32](0)}},
		{name: "null instances", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `null`}, want: ok(),
			result: &state.MachinePoolOutputs{ProviderIDList: []string{"p://a"}, Replicas: 1}},
		{name: "an instance the pool does not list", outputs: map[string]string{"provider_id_list": `["p://a"]`,
			"instances": `[{"provider_id": "p://a", "ready": true}, {"provider_id": "p://z", "ready": true}]`},
			want: bad(invalid, "instances", `element 1: the provider ID "p://z" is not in provider_id_list`)},
		{name: "a listed provider ID without an instance", outputs: map[string]string{"provider_id_list": `["p://a", "p://b"]`,
			"instances": `[{"provider_id": "p://a", "ready": true}]`},
			want: bad(invalid, "instances", `has no entry for the provider ID "p://b" of provider_id_list`)},
		{name: "an instance twice", outputs: map[string]string{"provider_id_list": `["p://a", "p://b"]`,
			"instances": `[{"provider_id": "p://a", "ready": true}, {"provider_id": "p://a", "ready": false}]`},
			want: bad(invalid, "instances", `"p://a" twice`)},
		{name: "instances a map", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `{"p://a": {"ready": true}}`},
			want: bad(invalid, "instances", "must be a list of {provider_id, ready, message}")},
		{name: "instance a string", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `["p://a"]`},
			want: bad(invalid, "instances", "element 0 must be an object")},
		{name: "instance without provider id", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"ready": true}]`},
			want: bad(invalid, "instances", "element 0: provider_id must be a string, got null")},
		{name: "instance with an empty provider id", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"provider_id": "", "ready": true}]`},
			want: bad(invalid, "instances", "non-empty string")},
		{name: "instance with ready as a string", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"provider_id": "p://a", "ready": "true"}]`},
			want: bad(invalid, "instances", `element 0: ready must be a bool, got the string "true"`)},
		{name: "instance without ready", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"provider_id": "p://a"}]`},
			want: bad(invalid, "instances", "ready must be a bool, got null")},
		{name: "instance message a number", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"provider_id": "p://a", "ready": true, "message": 3}]`},
			want: bad(invalid, "instances", "message must be a string")},
		{name: "instance message too long", outputs: map[string]string{"provider_id_list": `["p://a"]`,
			"instances": `[{"provider_id": "p://a", "ready": false, "message": "` + strings.Repeat("m", 257) + `"}]`},
			want: bad(invalid, "instances", "at most 256")},
		{name: "instance camelCase typo", outputs: map[string]string{"provider_id_list": `["p://a"]`, "instances": `[{"providerID": "p://a", "ready": true}]`},
			want: bad(invalid, "instances", `unexpected attribute "providerID"`)},
		{name: "sensitive instances", outputs: map[string]string{"provider_id_list": `["p://a"]`, "!instances": `[]`}, want: bad(invalid, "instances", "sensitive")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := state.MachinePool(stateWith(t, tc.outputs))
			check(t, err, tc.want)
			if tc.result != nil && !reflect.DeepEqual(got, tc.result) {
				t.Fatalf("got %+v\nwant %+v", got, tc.result)
			}
		})
	}
}

func TestTooManyProviderIDs(t *testing.T) {
	ids := make([]string, 10001)
	for i := range ids {
		ids[i] = fmt.Sprintf("p://%d", i)
	}
	b, _ := json.Marshal(ids)
	_, err := state.MachinePool(stateWith(t, map[string]string{"provider_id_list": string(b)}))
	check(t, err, bad(invalid, "provider_id_list", "at most 10000"))
}

func TestTooManyInstances(t *testing.T) {
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("p://%d", i)
	}
	list, _ := json.Marshal(ids)
	in := make([]map[string]any, 10001)
	for i := range in {
		in[i] = map[string]any{"provider_id": fmt.Sprintf("p://%d", i%10000), "ready": true}
	}
	b, _ := json.Marshal(in)
	_, err := state.MachinePool(stateWith(t, map[string]string{"provider_id_list": string(list), "instances": string(b)}))
	check(t, err, bad(invalid, "instances", "has 10001 instances; at most 10000"))
}

func TestNilStateHasNoContractOutputs(t *testing.T) {
	_, err := state.Cluster(nil)
	check(t, err, bad(missing, "control_plane_endpoint", "expected"))
	_, err = state.Machine(nil)
	check(t, err, bad(missing, "provider_id", "expected"))
	_, err = state.MachinePool(nil)
	check(t, err, bad(missing, "provider_id_list", "expected"))
}

func TestStatetestHelpersSatisfyTheContract(t *testing.T) {
	parse := func(s statetest.State) *state.State {
		t.Helper()
		b, err := s.JSON()
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if c, err := state.Cluster(parse(statetest.Cluster("10.1.1.1", 6443))); err != nil || c.ControlPlaneEndpoint.Host != "10.1.1.1" {
		t.Errorf("cluster helper: %+v %v", c, err)
	}
	if m, err := state.Machine(parse(statetest.Machine("p://m"))); err != nil || m.ProviderID != "p://m" {
		t.Errorf("machine helper: %+v %v", m, err)
	}
	if p, err := state.MachinePool(parse(statetest.MachinePool("p://1", "p://2"))); err != nil || p.Replicas != 2 {
		t.Errorf("pool helper: %+v %v", p, err)
	}
	if p, err := state.MachinePool(parse(statetest.MachinePool())); err != nil || p.Replicas != 0 {
		t.Errorf("empty pool helper: %+v %v", p, err)
	}
	if !state.StateEmpty(parse(statetest.Destroyed())) || state.StateEmpty(parse(statetest.Machine("p://m"))) {
		t.Errorf("destroyed helper is not empty, or machine helper is")
	}
}
