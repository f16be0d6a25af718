package terraformmachinepool

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind returns the engine adapter for TerraformMachinePool: a member of its Cluster whose
// Cluster API owner is a MachinePool (its machine template).
func Kind() engine.Kind {
	return engine.MemberKind{
		Member: engine.Member{
			Kind: infrav1.TerraformMachinePoolKind, OwnerKind: "MachinePool",
			NewOwner: func() client.Object { return &clusterv1.MachinePool{} },
			Details: func(o client.Object) engine.MemberDetails {
				mp := o.(*clusterv1.MachinePool)
				spec := mp.Spec.Template.Spec
				return engine.MemberDetails{BootstrapSecret: spec.Bootstrap.DataSecretName, Version: spec.Version, Replicas: mp.Spec.Replicas}
			},
		},
		NewObject:     func() engine.Object { return &infrav1.TerraformMachinePool{} },
		NewObjectList: func() client.ObjectList { return &infrav1.TerraformMachinePoolList{} },
		InfraRef:      poolInfraRef,
		Outputs:       applyOutputs,
	}
}

// applyOutputs maps provider_id_list, replicas and instances (state.MachinePool checks them
// all before anything is set); ready mirrors provisioned. A module without an instances output
// clears status.instances and status.readyInstances, so they never outlive the output.
func applyOutputs(obj engine.Object, st *state.State) error {
	tp := obj.(*infrav1.TerraformMachinePool)
	out, err := state.MachinePool(st)
	if err != nil {
		return err
	}
	tp.Spec.ProviderIDList = out.ProviderIDList
	replicas := out.Replicas
	tp.Status.Replicas = &replicas
	tp.Status.Instances = out.Instances
	tp.Status.ReadyInstances = out.ReadyInstances
	tp.Status.Ready = true
	return nil
}

// poolInfraRef is the infrastructure reference of a MachinePool's machine template.
func poolInfraRef(o client.Object) (clusterv1.ContractVersionedObjectReference, bool) {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return clusterv1.ContractVersionedObjectReference{}, false
	}
	return mp.Spec.Template.Spec.InfrastructureRef, true
}
