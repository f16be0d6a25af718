package terraformmachine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind is the engine adapter for TerraformMachine.
type Kind struct{}

var _ engine.Kind = Kind{}

// Name implements engine.Kind.
func (Kind) Name() string { return infrav1.TerraformMachineKind }

// New implements engine.Kind.
func (Kind) New() engine.Object { return &infrav1.TerraformMachine{} }

// Contract implements engine.Kind.
func (Kind) Contract(ctx context.Context, env engine.Env, obj engine.Object) (engine.ContractInputs, *engine.Wait, error) {
	tm := obj.(*infrav1.TerraformMachine)
	in := engine.ContractInputs{Kind: infrav1.TerraformMachineKind, Name: tm.Name, Namespace: tm.Namespace, ClusterName: env.ClusterName}
	cluster, err := engine.GetCluster(ctx, env, tm.Namespace)
	if err != nil {
		return in, nil, err
	}
	tc, wait, err := engine.ClusterInfra(ctx, env, cluster)
	if err != nil || wait != nil {
		return in, wait, err
	}
	machineName := engine.OwnerOfKind(tm, "Machine")
	if machineName == "" {
		return in, &engine.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: "waiting for a Machine to own this TerraformMachine", RequeueAfter: engine.DependencyWaitRequeue}, nil
	}
	m := &clusterv1.Machine{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: tm.Namespace, Name: machineName}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return in, &engine.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
				Message: fmt.Sprintf("Machine %s not found", machineName), RequeueAfter: engine.DependencyWaitRequeue}, nil
		}
		return in, nil, fmt.Errorf("get machine %s: %w", machineName, err)
	}
	data, wait, err := engine.BootstrapData(ctx, env, tm.Namespace, m.Spec.Bootstrap.DataSecretName, "Machine "+m.Name)
	if err != nil || wait != nil {
		return in, wait, err
	}
	outs, err := engine.ClusterOutputs(ctx, env, tc)
	if err != nil {
		return in, nil, err
	}
	ep := cluster.Spec.ControlPlaneEndpoint
	if !ep.IsValid() {
		ep = tc.Spec.ControlPlaneEndpoint
	}
	in.ControlPlaneEndpoint = &ep
	in.ClusterNetwork = &cluster.Spec.ClusterNetwork
	in.BootstrapData, in.FailureDomain, in.Version, in.ClusterOutputs = data, m.Spec.FailureDomain, m.Spec.Version, outs
	return in, nil, nil
}

// ApplyOutputs implements engine.Kind.
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

// Fingerprint implements engine.Kind: the Cluster, its TerraformCluster (provisioning,
// endpoint, outputs) and the owning Machine (bootstrap data name, version).
func (Kind) Fingerprint(ctx context.Context, env engine.Env, obj engine.Object) (string, error) {
	objs := map[string]client.Object{
		"Cluster/" + env.ClusterName:                    &clusterv1.Cluster{},
		"Machine/" + engine.OwnerOfKind(obj, "Machine"): &clusterv1.Machine{},
	}
	cluster := &clusterv1.Cluster{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: env.ClusterName}, cluster); err == nil {
		objs["TerraformCluster/"+cluster.Spec.InfrastructureRef.Name] = &infrav1.TerraformCluster{}
	}
	return engine.ResourceVersions(ctx, env.Cache, obj.GetNamespace(), objs)
}

// Children implements engine.Kind: machines have none.
func (Kind) Children(context.Context, engine.Env, engine.Object) ([]string, error) { return nil, nil }
