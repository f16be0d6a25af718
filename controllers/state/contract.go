package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Names of the contract outputs.
const (
	OutputControlPlaneEndpoint = "control_plane_endpoint"
	OutputFailureDomains       = "failure_domains"
	OutputProviderID           = "provider_id"
	OutputAddresses            = "addresses"
	OutputFailureDomain        = "failure_domain"
	OutputProviderIDList       = "provider_id_list"
	OutputReplicas             = "replicas"
	OutputInstances            = "instances"
	// OutputHealth is the optional health output of a machine module (runnerapi.HealthOutput).
	OutputHealth = runnerapi.HealthOutput
)

// Limits of the CRD fields the contract outputs fill.
const (
	maxHostLength          = 512
	maxProviderIDLength    = 512
	maxFailureDomains      = 100
	maxFailureDomainLength = 256
	maxAddresses           = 32
	maxAddressLength       = 256
	maxProviderIDs         = 10000
	maxInstanceMessage     = 256
)

// ClusterOutputs are a TerraformCluster module's contract outputs.
type ClusterOutputs struct {
	// ControlPlaneEndpoint comes from control_plane_endpoint (required).
	ControlPlaneEndpoint clusterv1.APIEndpoint
	// FailureDomains comes from failure_domains (optional), sorted by name.
	FailureDomains []clusterv1.FailureDomain
}

// MachineOutputs are a TerraformMachine module's contract outputs.
type MachineOutputs struct {
	// ProviderID comes from provider_id (required).
	ProviderID string
	// Addresses comes from addresses (optional), in the module's order.
	Addresses []clusterv1.MachineAddress
	// FailureDomain comes from failure_domain (optional).
	FailureDomain string
}

// MachinePoolOutputs are a TerraformMachinePool module's contract outputs.
type MachinePoolOutputs struct {
	// ProviderIDList comes from provider_id_list (required), in the module's order.
	ProviderIDList []string
	// Replicas comes from replicas (optional; default len(ProviderIDList)).
	Replicas int32
	// Instances comes from instances (optional), in the module's order: nil when the module
	// has no such output, else one entry for each provider ID of ProviderIDList.
	Instances []infrav1.TerraformMachinePoolInstance
	// ReadyInstances counts the Instances that are ready; nil when Instances is.
	ReadyInstances *int32
}

func missing(name, expected string) *OutputError {
	return &OutputError{Reason: infrav1.OutputMissingReason, Output: name,
		Message: fmt.Sprintf("the module has no output %q; expected %s", name, expected)}
}

func invalid(name, format string, args ...any) *OutputError {
	return &OutputError{Reason: infrav1.OutputInvalidReason, Output: name,
		Message: fmt.Sprintf("output %q: ", name) + fmt.Sprintf(format, args...)}
}

// contractValue returns a contract output's decoded value, or nil when it is absent or null
// (an error then if required). A sensitive contract output is refused.
func (s *State) contractValue(name string, required bool, expected string) (any, error) {
	var o Output
	ok := false
	if s != nil {
		o, ok = s.Outputs[name]
	}
	if !ok {
		if required {
			return nil, missing(name, expected)
		}
		return nil, nil
	}
	if o.Sensitive {
		return nil, invalid(name, "is marked sensitive; contract outputs are copied into the object's spec and status, "+
			"so they must not be sensitive (drop sensitive = true, wrapping a sensitive input in nonsensitive() only if it is not secret)")
	}
	dec := json.NewDecoder(bytes.NewReader(o.value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid(name, "the value is not JSON: %v", err)
	}
	if v == nil && required {
		return nil, &OutputError{Reason: infrav1.OutputMissingReason, Output: name,
			Message: fmt.Sprintf("output %q is null; expected %s", name, expected)}
	}
	return v, nil
}

// describe names the JSON type of a value for messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case json.Number:
		return "the number " + t.String()
	case string:
		return "the string " + quoteShort(t)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// object checks that v is an object with no keys besides allowed.
func object(name, what string, v any, allowed ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(name, "%s must be an object, got %s", what, describe(v))
	}
	for _, k := range sortedKeys(m) {
		known := false
		for _, a := range allowed {
			if k == a {
				known = true
				break
			}
		}
		if !known {
			return nil, invalid(name, "%s has the unexpected attribute %q; allowed: %s", what, k, strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

// integer accepts a whole JSON number or a string holding one (Terraform converts freely).
func integer(v any) (int64, bool) {
	var text string
	switch t := v.(type) {
	case json.Number:
		text = t.String()
	case string:
		text = t
	default:
		return 0, false
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false
	}
	return int64(f), true
}

func hasSpace(s string) bool {
	return strings.IndexFunc(s, unicode.IsSpace) >= 0
}

// Cluster reads a TerraformCluster module's contract outputs.
func Cluster(s *State) (*ClusterOutputs, error) {
	const epShape = "an object {host = string, port = number}"
	v, err := s.contractValue(OutputControlPlaneEndpoint, true, epShape)
	if err != nil {
		return nil, err
	}
	ep, err := object(OutputControlPlaneEndpoint, "the value", v, "host", "port")
	if err != nil {
		return nil, err
	}
	host, ok := ep["host"].(string)
	if !ok || host == "" {
		return nil, invalid(OutputControlPlaneEndpoint, "host must be a non-empty string, got %s", describe(ep["host"]))
	}
	if len(host) > maxHostLength || hasSpace(host) || strings.Contains(host, "/") {
		return nil, invalid(OutputControlPlaneEndpoint, "host must be a hostname or IP address of at most %d characters without a scheme or path, got %s", maxHostLength, quoteShort(host))
	}
	port, ok := integer(ep["port"])
	if !ok || port < 1 || port > 65535 {
		return nil, invalid(OutputControlPlaneEndpoint, "port must be a whole number from 1 to 65535, got %s", describe(ep["port"]))
	}
	out := &ClusterOutputs{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: int32(port)}}

	fd, err := s.contractValue(OutputFailureDomains, false, "")
	if err != nil {
		return nil, err
	}
	if out.FailureDomains, err = failureDomains(fd); err != nil {
		return nil, err
	}
	return out, nil
}

// failureDomains accepts a map name -> {control_plane, attributes} or a list of
// {name, control_plane, attributes}.
func failureDomains(v any) ([]clusterv1.FailureDomain, error) {
	const name = OutputFailureDomains
	var out []clusterv1.FailureDomain
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		for _, fdName := range sortedKeys(t) {
			fd, err := failureDomain(fmt.Sprintf("failure domain %q", fdName), fdName, t[fdName], false)
			if err != nil {
				return nil, err
			}
			out = append(out, fd)
		}
	case []any:
		for i, e := range t {
			fd, err := failureDomain(fmt.Sprintf("element %d", i), "", e, true)
			if err != nil {
				return nil, err
			}
			out = append(out, fd)
		}
	default:
		return nil, invalid(name, "must be a map of name to {control_plane, attributes} or a list of {name, control_plane, attributes}, got %s", describe(v))
	}
	if len(out) > maxFailureDomains {
		return nil, invalid(name, "has %d failure domains; at most %d are allowed", len(out), maxFailureDomains)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, invalid(name, "names the failure domain %q twice", out[i].Name)
		}
	}
	return out, nil
}

func failureDomain(what, fdName string, v any, listForm bool) (clusterv1.FailureDomain, error) {
	const name = OutputFailureDomains
	allowed := []string{"control_plane", "attributes"}
	if listForm {
		allowed = []string{"name", "control_plane", "attributes"}
	}
	m, err := object(name, what, v, allowed...)
	if err != nil {
		return clusterv1.FailureDomain{}, err
	}
	if listForm {
		n, ok := m["name"].(string)
		if !ok {
			return clusterv1.FailureDomain{}, invalid(name, "%s: name must be a string, got %s", what, describe(m["name"]))
		}
		fdName = n
	}
	if fdName == "" || len(fdName) > maxFailureDomainLength {
		return clusterv1.FailureDomain{}, invalid(name, "%s: the name must have 1 to %d characters", what, maxFailureDomainLength)
	}
	fd := clusterv1.FailureDomain{Name: fdName}
	switch cp := m["control_plane"].(type) {
	case nil:
	case bool:
		fd.ControlPlane = ptr.To(cp)
	default:
		return clusterv1.FailureDomain{}, invalid(name, "%s: control_plane must be a bool, got %s", what, describe(cp))
	}
	switch attrs := m["attributes"].(type) {
	case nil:
	case map[string]any:
		fd.Attributes = make(map[string]string, len(attrs))
		for _, k := range sortedKeys(attrs) {
			switch a := attrs[k].(type) {
			case string:
				fd.Attributes[k] = a
			case json.Number:
				fd.Attributes[k] = a.String()
			case bool:
				fd.Attributes[k] = strconv.FormatBool(a)
			default:
				return clusterv1.FailureDomain{}, invalid(name, "%s: attribute %q must be a string, number or bool, got %s", what, k, describe(a))
			}
		}
	default:
		return clusterv1.FailureDomain{}, invalid(name, "%s: attributes must be a map of strings, got %s", what, describe(attrs))
	}
	return fd, nil
}

// Machine reads a TerraformMachine module's contract outputs.
func Machine(s *State) (*MachineOutputs, error) {
	v, err := s.contractValue(OutputProviderID, true, "a non-empty string")
	if err != nil {
		return nil, err
	}
	id, err := providerID(OutputProviderID, "the value", v)
	if err != nil {
		return nil, err
	}
	out := &MachineOutputs{ProviderID: id}

	av, err := s.contractValue(OutputAddresses, false, "")
	if err != nil {
		return nil, err
	}
	if out.Addresses, err = addresses(av); err != nil {
		return nil, err
	}

	fv, err := s.contractValue(OutputFailureDomain, false, "")
	if err != nil {
		return nil, err
	}
	switch fd := fv.(type) {
	case nil:
	case string:
		if len(fd) > maxFailureDomainLength {
			return nil, invalid(OutputFailureDomain, "must have at most %d characters", maxFailureDomainLength)
		}
		out.FailureDomain = fd
	default:
		return nil, invalid(OutputFailureDomain, "must be a string, got %s", describe(fv))
	}
	if h := MachineHealth(s); h != nil && h.Invalid != "" {
		return nil, &OutputError{Reason: infrav1.OutputInvalidReason, Output: OutputHealth, Message: h.Invalid}
	}
	return out, nil
}

// MachineHealth reads a machine module's optional health output from a state as a sample
// (runnerapi.ParseHealth: a bad value is a sample whose Invalid says why); nil when the module
// exports none.
func MachineHealth(s *State) *runnerapi.HealthSample {
	if s == nil {
		return nil
	}
	o, ok := s.Outputs[OutputHealth]
	if !ok {
		return nil
	}
	h := runnerapi.ParseHealth(o.value, o.Sensitive)
	return &h
}

func providerID(name, what string, v any) (string, error) {
	id, ok := v.(string)
	if !ok {
		return "", invalid(name, "%s must be a string, got %s", what, describe(v))
	}
	if id == "" || len(id) > maxProviderIDLength || hasSpace(id) {
		return "", invalid(name, "%s must be a non-empty string of at most %d characters without spaces, got %s", what, maxProviderIDLength, quoteShort(id))
	}
	return id, nil
}

// listOutput reads a list output element by element: nil when the output is absent (null),
// else a list of at most limit elements (elements describes them and noun counts them, in
// messages), each read by elem, which is told the element's place ("element 3").
func listOutput[T any](name string, v any, elements, noun string, limit int, elem func(what string, e any) (T, error)) ([]T, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, invalid(name, "must be a list of %s, got %s", elements, describe(v))
	}
	if len(list) > limit {
		return nil, invalid(name, "has %d %s; at most %d are allowed", len(list), noun, limit)
	}
	out := make([]T, 0, len(list))
	for i, e := range list {
		t, err := elem(fmt.Sprintf("element %d", i), e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

var addressTypes = map[string]clusterv1.MachineAddressType{
	string(clusterv1.MachineHostName):    clusterv1.MachineHostName,
	string(clusterv1.MachineExternalIP):  clusterv1.MachineExternalIP,
	string(clusterv1.MachineInternalIP):  clusterv1.MachineInternalIP,
	string(clusterv1.MachineExternalDNS): clusterv1.MachineExternalDNS,
	string(clusterv1.MachineInternalDNS): clusterv1.MachineInternalDNS,
}

func addresses(v any) ([]clusterv1.MachineAddress, error) {
	const name = OutputAddresses
	return listOutput(name, v, "{type, address}", "addresses", maxAddresses, func(what string, e any) (clusterv1.MachineAddress, error) {
		m, err := object(name, what, e, "type", "address")
		if err != nil {
			return clusterv1.MachineAddress{}, err
		}
		ts, _ := m["type"].(string)
		typ, ok := addressTypes[ts]
		if !ok {
			return clusterv1.MachineAddress{}, invalid(name, "%s: type must be one of Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS, got %s", what, describe(m["type"]))
		}
		addr, ok := m["address"].(string)
		if !ok || addr == "" || len(addr) > maxAddressLength {
			return clusterv1.MachineAddress{}, invalid(name, "%s: address must be a non-empty string of at most %d characters, got %s", what, maxAddressLength, describe(m["address"]))
		}
		return clusterv1.MachineAddress{Type: typ, Address: addr}, nil
	})
}

// MachinePool reads a TerraformMachinePool module's contract outputs.
func MachinePool(s *State) (*MachinePoolOutputs, error) {
	const name = OutputProviderIDList
	v, err := s.contractValue(name, true, "a list of provider ID strings")
	if err != nil {
		return nil, err
	}
	out := &MachinePoolOutputs{}
	seen := map[string]struct{}{}
	out.ProviderIDList, err = listOutput(name, v, "strings", "provider IDs", maxProviderIDs, func(what string, e any) (string, error) {
		id, err := providerID(name, what, e)
		if err != nil {
			return "", err
		}
		if _, dup := seen[id]; dup {
			return "", invalid(name, "lists the provider ID %s twice", quoteShort(id))
		}
		seen[id] = struct{}{}
		return id, nil
	})
	if err != nil {
		return nil, err
	}
	out.Replicas = int32(len(out.ProviderIDList))

	rv, err := s.contractValue(OutputReplicas, false, "")
	if err != nil {
		return nil, err
	}
	if rv != nil {
		n, ok := integer(rv)
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, invalid(OutputReplicas, "must be a whole number from 0 to %d, got %s", math.MaxInt32, describe(rv))
		}
		out.Replicas = int32(n)
	}

	iv, err := s.contractValue(OutputInstances, false, "")
	if err != nil {
		return nil, err
	}
	if out.Instances, err = instances(iv, out.ProviderIDList, seen); err != nil {
		return nil, err
	}
	if out.Instances != nil {
		ready := int32(0)
		for _, in := range out.Instances {
			if in.Ready {
				ready++
			}
		}
		out.ReadyInstances = &ready
	}
	return out, nil
}

// instances reads the optional instances output: a list of {provider_id, ready, message}, one
// for each provider ID of provider_id_list (ids, and pool, the same as a set) and for no other,
// so that the status never describes an instance the pool does not list, nor leaves one out.
func instances(v any, ids []string, pool map[string]struct{}) ([]infrav1.TerraformMachinePoolInstance, error) {
	const name = OutputInstances
	seen := map[string]struct{}{}
	out, err := listOutput(name, v, "{provider_id, ready, message}", "instances", maxProviderIDs, func(what string, e any) (infrav1.TerraformMachinePoolInstance, error) {
		var none infrav1.TerraformMachinePoolInstance
		m, err := object(name, what, e, "provider_id", "ready", "message")
		if err != nil {
			return none, err
		}
		id, err := providerID(name, what+": provider_id", m["provider_id"])
		if err != nil {
			return none, err
		}
		if _, dup := seen[id]; dup {
			return none, invalid(name, "lists the provider ID %s twice", quoteShort(id))
		}
		seen[id] = struct{}{}
		if _, listed := pool[id]; !listed {
			return none, invalid(name, "%s: the provider ID %s is not in provider_id_list; every instance must be one of the pool's provider IDs", what, quoteShort(id))
		}
		ready, ok := m["ready"].(bool)
		if !ok {
			return none, invalid(name, "%s: ready must be a bool, got %s", what, describe(m["ready"]))
		}
		in := infrav1.TerraformMachinePoolInstance{ProviderID: id, Ready: ready}
		switch msg := m["message"].(type) {
		case nil:
		case string:
			if len(msg) > maxInstanceMessage {
				return none, invalid(name, "%s: message must have at most %d bytes", what, maxInstanceMessage)
			}
			in.Message = msg
		default:
			return none, invalid(name, "%s: message must be a string, got %s", what, describe(msg))
		}
		return in, nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		// No instances output.
		return nil, nil
	}
	if len(seen) != len(pool) {
		for _, id := range ids {
			if _, ok := seen[id]; !ok {
				return nil, invalid(name, "has no entry for the provider ID %s of provider_id_list; list every instance of the pool, or leave the output out", quoteShort(id))
			}
		}
	}
	return out, nil
}
