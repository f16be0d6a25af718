package terraformmachine

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind is the engine adapter for TerraformMachine.
type Kind struct{}

var _ engine.Kind = Kind{}

// member is what a TerraformMachine takes from its Machine.
var member = engine.Member{
	Kind: infrav1.TerraformMachineKind, OwnerKind: "Machine",
	NewOwner: func() client.Object { return &clusterv1.Machine{} },
	Details: func(o client.Object) (*string, string, string) {
		m := o.(*clusterv1.Machine)
		return m.Spec.Bootstrap.DataSecretName, m.Spec.FailureDomain, m.Spec.Version
	},
}

// Name implements engine.Kind.
func (Kind) Name() string { return infrav1.TerraformMachineKind }

// New implements engine.Kind.
func (Kind) New() engine.Object { return &infrav1.TerraformMachine{} }

// Contract implements engine.Kind.
func (Kind) Contract(ctx context.Context, env engine.Env, obj engine.Object) (engine.ContractInputs, *engine.Wait, error) {
	return engine.MemberContract(ctx, env, obj, member)
}

// Fingerprint implements engine.Kind.
func (Kind) Fingerprint(ctx context.Context, env engine.Env, obj engine.Object) (string, error) {
	return engine.MemberFingerprint(ctx, env, obj, member)
}

// ApplyOutputs implements engine.Kind: provider_id (fixed once set), addresses, failure_domain.
func (Kind) ApplyOutputs(obj engine.Object, st *state.State) error {
	tm := obj.(*infrav1.TerraformMachine)
	out, err := state.Machine(st)
	if err != nil {
		return err
	}
	if tm.Spec.ProviderID != "" && tm.Spec.ProviderID != out.ProviderID {
		return &state.OutputError{Reason: infrav1.OutputInvalidReason, Output: "provider_id",
			Message: fmt.Sprintf("output provider_id %q differs from spec.providerID %q, which cannot change", out.ProviderID, tm.Spec.ProviderID)}
	}
	tm.Spec.ProviderID = out.ProviderID
	tm.Status.Addresses = out.Addresses
	tm.Status.FailureDomain = out.FailureDomain
	return nil
}

// Children implements engine.Kind: machines have none.
func (Kind) Children(context.Context, engine.Env, engine.Object) ([]string, error) { return nil, nil }
