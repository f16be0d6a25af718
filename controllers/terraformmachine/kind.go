package terraformmachine

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind returns the engine adapter for TerraformMachine: a member of its Cluster whose Cluster
// API owner is a Machine.
func Kind() engine.Kind {
	return engine.MemberKind{
		Member: engine.Member{
			Kind: infrav1.TerraformMachineKind, OwnerKind: "Machine",
			NewOwner: func() client.Object { return &clusterv1.Machine{} },
			Details: func(o client.Object) engine.MemberDetails {
				m := o.(*clusterv1.Machine)
				return engine.MemberDetails{BootstrapSecret: m.Spec.Bootstrap.DataSecretName, FailureDomain: m.Spec.FailureDomain, Version: m.Spec.Version}
			},
		},
		NewObject:     func() engine.Object { return &infrav1.TerraformMachine{} },
		NewObjectList: func() client.ObjectList { return &infrav1.TerraformMachineList{} },
		InfraRef:      machineInfraRef,
		Outputs:       applyOutputs,
	}
}

// applyOutputs maps provider_id (fixed once set), addresses and failure_domain.
func applyOutputs(obj engine.Object, st *state.State) error {
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

// machineInfraRef is a Machine's infrastructure reference.
func machineInfraRef(o client.Object) (clusterv1.ContractVersionedObjectReference, bool) {
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return clusterv1.ContractVersionedObjectReference{}, false
	}
	return m.Spec.InfrastructureRef, true
}
