package terraformcluster

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Kind is the engine adapter for TerraformCluster.
type Kind struct{}

var _ engine.Kind = Kind{}

// Name implements engine.Kind.
func (Kind) Name() string { return infrav1.TerraformClusterKind }

// New implements engine.Kind.
func (Kind) New() engine.Object { return &infrav1.TerraformCluster{} }

// NewList implements engine.Kind.
func (Kind) NewList() client.ObjectList { return &infrav1.TerraformClusterList{} }

// Watches implements engine.Kind: a deleting cluster waits for its machines and pools, so
// their going triggers it.
func (Kind) Watches() []engine.Watch {
	return []engine.Watch{{Object: &infrav1.TerraformMachine{}}, {Object: &infrav1.TerraformMachinePool{}}}
}

// Contract implements engine.Kind.
func (Kind) Contract(ctx context.Context, env engine.Env, obj engine.Object) (engine.ContractInputs, *decide.Wait, error) {
	tc := obj.(*infrav1.TerraformCluster)
	in := engine.ContractInputs{Kind: infrav1.TerraformClusterKind, Name: tc.Name, Namespace: tc.Namespace, ClusterName: env.ClusterName}
	cluster, err := engine.GetCluster(ctx, env, tc.Namespace)
	if err != nil {
		return in, nil, err
	}
	in.ClusterNetwork = &cluster.Spec.ClusterNetwork
	if _, fromOutputs := tc.Annotations[infrav1.EndpointFromOutputsAnnotation]; tc.Spec.ControlPlaneEndpoint.IsValid() && !fromOutputs {
		ep := tc.Spec.ControlPlaneEndpoint
		in.ControlPlaneEndpoint = &ep
	}
	return in, nil, nil
}

// ApplyOutputs implements engine.Kind. A cluster whose spec sets the endpoint may omit the
// control_plane_endpoint output; one that outputs it must output the same endpoint.
func (Kind) ApplyOutputs(obj engine.Object, st *state.State) error {
	tc := obj.(*infrav1.TerraformCluster)
	out, err := state.Cluster(st)
	if oe, ok := state.AsOutputError(err); ok && oe.Output == "control_plane_endpoint" &&
		oe.Reason == infrav1.OutputMissingReason && tc.Spec.ControlPlaneEndpoint.IsValid() {
		return nil
	}
	if err != nil {
		return err
	}
	if tc.Spec.ControlPlaneEndpoint.IsValid() && tc.Spec.ControlPlaneEndpoint != out.ControlPlaneEndpoint {
		return &state.OutputError{Reason: infrav1.OutputInvalidReason, Output: "control_plane_endpoint", Message: fmt.Sprintf(
			"output control_plane_endpoint %s:%d differs from spec.controlPlaneEndpoint %s:%d, which cannot change",
			out.ControlPlaneEndpoint.Host, out.ControlPlaneEndpoint.Port, tc.Spec.ControlPlaneEndpoint.Host, tc.Spec.ControlPlaneEndpoint.Port)}
	}
	if !tc.Spec.ControlPlaneEndpoint.IsValid() {
		if tc.Annotations == nil {
			tc.Annotations = map[string]string{}
		}
		tc.Annotations[infrav1.EndpointFromOutputsAnnotation] = "true"
	}
	tc.Spec.ControlPlaneEndpoint = out.ControlPlaneEndpoint
	tc.Status.FailureDomains = out.FailureDomains
	return nil
}

// Fingerprint implements engine.Kind: the contract inputs themselves, which come from cached
// objects only (the Cluster's network and endpoint, the object's own endpoint).
func (k Kind) Fingerprint(ctx context.Context, env engine.Env, obj engine.Object) (engine.Fingerprint, error) {
	in, wait, err := k.Contract(ctx, env, obj)
	if err != nil {
		return engine.Fingerprint{}, err
	}
	return engine.ContractFingerprint(in, wait, true)
}

// Children implements engine.Kind: the machines and pools of the same Cluster.
func (Kind) Children(ctx context.Context, env engine.Env, obj engine.Object) ([]string, error) {
	if env.ClusterName == "" {
		return nil, nil
	}
	var names []string
	machines := &infrav1.TerraformMachineList{}
	if err := engine.ListOwned(ctx, env.Cache, machines, obj.GetNamespace(), env.ClusterName); err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	for _, m := range machines.Items {
		names = append(names, infrav1.TerraformMachineKind+"/"+m.Name)
	}
	pools := &infrav1.TerraformMachinePoolList{}
	if err := engine.ListOwned(ctx, env.Cache, pools, obj.GetNamespace(), env.ClusterName); err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	for _, p := range pools.Items {
		names = append(names, infrav1.TerraformMachinePoolKind+"/"+p.Name)
	}
	return names, nil
}
