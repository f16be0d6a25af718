package statetest

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Output is one root module output of a test state.
type Output struct {
	// Value is encoded with encoding/json.
	Value any
	// Sensitive marks the output sensitive, as `sensitive = true` does.
	Sensitive bool
}

// State describes a test state.
type State struct {
	// Serial and Lineage identify the revision (defaults: 1 and a fixed lineage).
	Serial  uint64
	Lineage string
	// Outputs of the root module.
	Outputs map[string]Output
	// Managed is how many managed resources (terraform_data, one instance each) the state
	// records; 0 is what a successful destroy leaves.
	Managed int
	// DataSources is how many data sources the state records.
	DataSources int
}

// DefaultLineage is the lineage of a State that sets none.
const DefaultLineage = "00000000-0000-4000-8000-000000000000"

// Cluster is a state with a TerraformCluster's contract outputs and one resource.
func Cluster(host string, port int) State {
	return State{Managed: 1, Outputs: map[string]Output{
		state.OutputControlPlaneEndpoint: {Value: map[string]any{"host": host, "port": port}},
	}}
}

// Machine is a state with a TerraformMachine's required contract output and one resource.
func Machine(providerID string) State {
	return State{Managed: 1, Outputs: map[string]Output{state.OutputProviderID: {Value: providerID}}}
}

// MachinePool is a state with a TerraformMachinePool's required contract output and one
// resource per provider ID.
func MachinePool(providerIDs ...string) State {
	if providerIDs == nil {
		providerIDs = []string{}
	}
	return State{Managed: len(providerIDs), Outputs: map[string]Output{state.OutputProviderIDList: {Value: providerIDs}}}
}

// Destroyed is the state a successful destroy leaves: no resources, no outputs.
func Destroyed() State { return State{Serial: 2} }

func typeOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case int, int32, int64, float64, json.Number:
		return "number"
	}
	return "dynamic"
}

// JSON renders the state as Terraform writes it (format version 4, indented). Output types are
// approximations (CAPTF never reads them).
func (s State) JSON() ([]byte, error) {
	serial, lineage := s.Serial, s.Lineage
	if serial == 0 {
		serial = 1
	}
	if lineage == "" {
		lineage = DefaultLineage
	}
	outputs := map[string]any{}
	for name, o := range s.Outputs {
		out := map[string]any{"value": o.Value, "type": typeOf(o.Value)}
		if o.Sensitive {
			out["sensitive"] = true
		}
		outputs[name] = out
	}
	resources := []any{}
	for i := 0; i < s.DataSources; i++ {
		resources = append(resources, map[string]any{
			"mode": "data", "type": "terraform_remote_state", "name": fmt.Sprintf("d%d", i),
			"provider":  `provider["terraform.io/builtin/terraform"]`,
			"instances": []any{map[string]any{"schema_version": 0, "attributes": map[string]any{}}},
		})
	}
	for i := 0; i < s.Managed; i++ {
		resources = append(resources, map[string]any{
			"mode": "managed", "type": "terraform_data", "name": fmt.Sprintf("r%d", i),
			"provider": `provider["terraform.io/builtin/terraform"]`,
			"instances": []any{map[string]any{"schema_version": 0, "attributes": map[string]any{
				"id": fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			}}},
		})
	}
	b, err := json.MarshalIndent(map[string]any{
		"version":           state.StateFormatVersion,
		"terraform_version": "1.10.0",
		"serial":            serial,
		"lineage":           lineage,
		"outputs":           outputs,
		"resources":         resources,
		"check_results":     nil,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode test state: %w", err)
	}
	return b, nil
}

// Secret builds the backend's state Secret for this state.
func Secret(namespace, suffix string, s State) (*corev1.Secret, error) {
	raw, err := s.JSON()
	if err != nil {
		return nil, err
	}
	gz, err := state.Compress(raw)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: naming.StateSecretName(suffix), Namespace: namespace},
		Data:       map[string][]byte{state.StateKey: gz},
	}, nil
}

// Write creates the state Secret, or replaces its data when it exists, as the backend does at the
// end of an apply or destroy.
func Write(ctx context.Context, c client.Client, namespace, suffix string, s State) error {
	want, err := Secret(namespace, suffix, s)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, want.DeepCopy()); err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create state secret: %w", err)
		}
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Secret
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), &cur); err != nil {
			return err
		}
		cur.Data = want.Data
		return c.Update(ctx, &cur)
	})
	if err != nil {
		return fmt.Errorf("update state secret: %w", err)
	}
	return nil
}
