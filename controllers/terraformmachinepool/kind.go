package terraformmachinepool

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

// Kind is the engine adapter for TerraformMachinePool.
type Kind struct{}

var _ engine.Kind = Kind{}

// Name implements engine.Kind.
func (Kind) Name() string { return infrav1.TerraformMachinePoolKind }

// New implements engine.Kind.
func (Kind) New() engine.Object { return &infrav1.TerraformMachinePool{} }

// Contract implements engine.Kind.
func (Kind) Contract(ctx context.Context, env engine.Env, obj engine.Object) (engine.ContractInputs, *engine.Wait, error) {
	tp := obj.(*infrav1.TerraformMachinePool)
	in := engine.ContractInputs{Kind: infrav1.TerraformMachinePoolKind, Name: tp.Name, Namespace: tp.Namespace, ClusterName: env.ClusterName}
	cluster, err := engine.GetCluster(ctx, env, tp.Namespace)
	if err != nil {
		return in, nil, err
	}
	tc, wait, err := engine.ClusterInfra(ctx, env, cluster)
	if err != nil || wait != nil {
		return in, wait, err
	}
	poolName := engine.OwnerOfKind(tp, "MachinePool")
	if poolName == "" {
		return in, &engine.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
			Message: "waiting for a MachinePool to own this TerraformMachinePool", RequeueAfter: engine.DependencyWaitRequeue}, nil
	}
	mp := &clusterv1.MachinePool{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: tp.Namespace, Name: poolName}, mp); err != nil {
		if apierrors.IsNotFound(err) {
			return in, &engine.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForBootstrapDataReason,
				Message: fmt.Sprintf("MachinePool %s not found", poolName), RequeueAfter: engine.DependencyWaitRequeue}, nil
		}
		return in, nil, fmt.Errorf("get machinepool %s: %w", poolName, err)
	}
	data, wait, err := engine.BootstrapData(ctx, env, tp.Namespace, mp.Spec.Template.Spec.Bootstrap.DataSecretName, "MachinePool "+mp.Name)
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
	in.BootstrapData, in.Version, in.ClusterOutputs = data, mp.Spec.Template.Spec.Version, outs
	return in, nil, nil
}

// ApplyOutputs implements engine.Kind.
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

// Fingerprint implements engine.Kind: the Cluster, its TerraformCluster (provisioning,
// endpoint, outputs) and the owning MachinePool (bootstrap data name, version).
func (Kind) Fingerprint(ctx context.Context, env engine.Env, obj engine.Object) (string, error) {
	objs := map[string]client.Object{
		"Cluster/" + env.ClusterName:                            &clusterv1.Cluster{},
		"MachinePool/" + engine.OwnerOfKind(obj, "MachinePool"): &clusterv1.MachinePool{},
	}
	cluster := &clusterv1.Cluster{}
	if err := env.Cache.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: env.ClusterName}, cluster); err == nil {
		objs["TerraformCluster/"+cluster.Spec.InfrastructureRef.Name] = &infrav1.TerraformCluster{}
	}
	return engine.ResourceVersions(ctx, env.Cache, obj.GetNamespace(), objs)
}

// Children implements engine.Kind: pools have none.
func (Kind) Children(context.Context, engine.Env, engine.Object) ([]string, error) { return nil, nil }
