package inputs

import (
	"encoding/json"
	"errors"
	"sort"
	"strconv"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// ContractInputs is what CAPTF itself tells a module: who it runs for and, for machines, what
// Cluster API gives the machine. The engine fills it; Assemble passes it as the "captf" variable.
type ContractInputs struct {
	// Kind is TerraformCluster, TerraformMachine or TerraformMachinePool.
	Kind string
	// Name and Namespace are the reconciled object's.
	Name      string
	Namespace string
	// ClusterName is the owning Cluster API Cluster's name.
	ClusterName string
	// ControlPlaneEndpoint is the cluster's API endpoint, once known (machines and pools; a
	// cluster whose spec sets it).
	ControlPlaneEndpoint *clusterv1.APIEndpoint
	// ClusterNetwork is the Cluster's spec.clusterNetwork, when set.
	ClusterNetwork *clusterv1.ClusterNetwork
	// BootstrapData is the `value` key of the Machine's (or MachinePool's) bootstrap data
	// Secret. It is sensitive: Assemble adds it to the redact list.
	BootstrapData string
	// FailureDomain is the failure domain Cluster API chose for the machine.
	FailureDomain string
	// Version is the Kubernetes version of the Machine or MachinePool.
	Version string
	// ClusterOutputs are the TerraformCluster module's non-sensitive outputs (see
	// state.ClusterOutputsForMachines), for machines and pools.
	ClusterOutputs map[string]json.RawMessage
	// Replicas is the owning MachinePool's spec.replicas (pools only).
	Replicas *int32
}

// Field names of the captf object, as a module reads them (var.captf.<field>).
const (
	FieldKind                 = "kind"
	FieldName                 = "name"
	FieldNamespace            = "namespace"
	FieldClusterName          = "cluster_name"
	FieldControlPlaneEndpoint = "control_plane_endpoint"
	FieldClusterNetwork       = "cluster_network"
	FieldBootstrapData        = "bootstrap_data"
	FieldFailureDomain        = "failure_domain"
	FieldVersion              = "version"
	FieldClusterOutputs       = "cluster_outputs"
	// FieldReplicas is a pool's only: the owning MachinePool's desired replicas.
	FieldReplicas = "replicas"
)

// ContractFields lists the fields of the captf object every kind has. Every one is always
// present, so a module can read any of them without try(): unset scalars and objects are null,
// and cluster_outputs is an empty object when there are none. A pool's captf object has one
// more, FieldReplicas (PoolContractFields), which clusters and machines lack: it came after
// the others, and leaving it out of theirs keeps their inputs hash, so an upgrade runs none of
// their modules again.
func ContractFields() []string {
	return []string{FieldKind, FieldName, FieldNamespace, FieldClusterName, FieldControlPlaneEndpoint,
		FieldClusterNetwork, FieldBootstrapData, FieldFailureDomain, FieldVersion, FieldClusterOutputs}
}

// PoolContractFields lists the fields of a TerraformMachinePool's captf object.
func PoolContractFields() []string {
	return append(ContractFields(), FieldReplicas)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func stringList(in []string) []any {
	out := make([]any, 0, len(in))
	for _, s := range in {
		out = append(out, s)
	}
	return out
}

// object builds the captf variable. Values are the same Go shapes parseJSON produces, so the
// whole variables tree encodes canonically.
func (c ContractInputs) object() (map[string]any, error) {
	if c.Kind == "" || c.Name == "" || c.Namespace == "" {
		return nil, errors.New("contract inputs: kind, name and namespace are required")
	}
	var endpoint any
	if c.ControlPlaneEndpoint != nil && !c.ControlPlaneEndpoint.IsZero() {
		endpoint = map[string]any{
			"host": c.ControlPlaneEndpoint.Host,
			"port": json.Number(itoa(int64(c.ControlPlaneEndpoint.Port))),
		}
	}
	var network any
	if c.ClusterNetwork != nil {
		var port any
		if c.ClusterNetwork.APIServerPort != 0 {
			port = json.Number(itoa(int64(c.ClusterNetwork.APIServerPort)))
		}
		network = map[string]any{
			"api_server_port": port,
			"pods":            stringList(c.ClusterNetwork.Pods.CIDRBlocks),
			"services":        stringList(c.ClusterNetwork.Services.CIDRBlocks),
			"service_domain":  nullIfEmpty(c.ClusterNetwork.ServiceDomain),
		}
	}
	outputs := make(map[string]any, len(c.ClusterOutputs))
	names := make([]string, 0, len(c.ClusterOutputs))
	for n := range c.ClusterOutputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v, err := parseJSON(c.ClusterOutputs[n])
		if err != nil {
			return nil, invalidf("the cluster output %q passed to machines is not valid JSON: %v", n, err)
		}
		outputs[n] = v
	}
	obj := map[string]any{
		FieldKind:                 c.Kind,
		FieldName:                 c.Name,
		FieldNamespace:            c.Namespace,
		FieldClusterName:          nullIfEmpty(c.ClusterName),
		FieldControlPlaneEndpoint: endpoint,
		FieldClusterNetwork:       network,
		FieldBootstrapData:        nullIfEmpty(c.BootstrapData),
		FieldFailureDomain:        nullIfEmpty(c.FailureDomain),
		FieldVersion:              nullIfEmpty(c.Version),
		FieldClusterOutputs:       outputs,
	}
	if c.Kind == infrav1.TerraformMachinePoolKind {
		var replicas any
		if c.Replicas != nil {
			replicas = json.Number(itoa(int64(*c.Replicas)))
		}
		obj[FieldReplicas] = replicas
	}
	return obj, nil
}
