package terraformmachinepool

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind is the engine adapter for TerraformMachinePool.
type Kind struct{}

var _ engine.Kind = Kind{}

// member is what a TerraformMachinePool takes from its MachinePool (its machine template).
var member = engine.Member{
	Kind: infrav1.TerraformMachinePoolKind, OwnerKind: "MachinePool",
	NewOwner: func() client.Object { return &clusterv1.MachinePool{} },
	Details: func(o client.Object) (*string, string, string) {
		spec := o.(*clusterv1.MachinePool).Spec.Template.Spec
		return spec.Bootstrap.DataSecretName, "", spec.Version
	},
}

// Name implements engine.Kind.
func (Kind) Name() string { return infrav1.TerraformMachinePoolKind }

// New implements engine.Kind.
func (Kind) New() engine.Object { return &infrav1.TerraformMachinePool{} }

// Contract implements engine.Kind.
func (Kind) Contract(ctx context.Context, env engine.Env, obj engine.Object) (engine.ContractInputs, *engine.Wait, error) {
	return engine.MemberContract(ctx, env, obj, member)
}

// Fingerprint implements engine.Kind.
func (Kind) Fingerprint(ctx context.Context, env engine.Env, obj engine.Object) (string, error) {
	return engine.MemberFingerprint(ctx, env, obj, member)
}

// ApplyOutputs implements engine.Kind: provider_id_list and replicas; ready mirrors provisioned.
func (Kind) ApplyOutputs(obj engine.Object, st *state.State) error {
	tp := obj.(*infrav1.TerraformMachinePool)
	out, err := state.MachinePool(st)
	if err != nil {
		return err
	}
	tp.Spec.ProviderIDList = out.ProviderIDList
	replicas := out.Replicas
	tp.Status.Replicas = &replicas
	tp.Status.Ready = true
	return nil
}

// Children implements engine.Kind: pools have none.
func (Kind) Children(context.Context, engine.Env, engine.Object) ([]string, error) { return nil, nil }
