package engine_test

import (
	"context"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachine"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachinepool"
)

// ownerMapOf is the map of the watch on a member kind's Cluster API owner.
func ownerMapOf(t *testing.T, k engine.Kind) handler.MapFunc {
	t.Helper()
	for _, w := range k.Watches() {
		if w.Map != nil {
			return w.Map
		}
	}
	t.Fatalf("%s watches no owner with a map", k.Name())
	return nil
}

// TestOwnerEventsReachTheNamedObject: a Machine's or a MachinePool's event reaches the object
// its infrastructure reference names, and only when the reference names the member's kind
// and a name; another object (the other kind's owner) reaches nothing.
func TestOwnerEventsReachTheNamedObject(t *testing.T) {
	ref := func(kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: kind, Name: name}
	}
	machine := func(r clusterv1.ContractVersionedObjectReference) client.Object {
		m := &clusterv1.Machine{}
		m.Namespace, m.Name, m.Spec.InfrastructureRef = "ns", "m", r
		return m
	}
	pool := func(r clusterv1.ContractVersionedObjectReference) client.Object {
		mp := &clusterv1.MachinePool{}
		mp.Namespace, mp.Name, mp.Spec.Template.Spec.InfrastructureRef = "ns", "mp", r
		return mp
	}
	for _, tc := range []struct {
		name  string
		kind  engine.Kind
		owner client.Object
		want  string
	}{
		{"a Machine naming a TerraformMachine", terraformmachine.Kind(), machine(ref(infrav1.TerraformMachineKind, "tm")), "tm"},
		{"a Machine naming another kind", terraformmachine.Kind(), machine(ref("DockerMachine", "tm")), ""},
		{"a Machine naming no object yet", terraformmachine.Kind(), machine(ref(infrav1.TerraformMachineKind, "")), ""},
		{"a MachinePool at the machine's watch", terraformmachine.Kind(), pool(ref(infrav1.TerraformMachineKind, "tm")), ""},
		{"a MachinePool naming a TerraformMachinePool", terraformmachinepool.Kind(), pool(ref(infrav1.TerraformMachinePoolKind, "tp")), "tp"},
		{"a MachinePool naming a TerraformMachine", terraformmachinepool.Kind(), pool(ref(infrav1.TerraformMachineKind, "tp")), ""},
		{"a MachinePool naming no object yet", terraformmachinepool.Kind(), pool(ref(infrav1.TerraformMachinePoolKind, "")), ""},
		{"a Machine at the pool's watch", terraformmachinepool.Kind(), machine(ref(infrav1.TerraformMachinePoolKind, "tp")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ownerMapOf(t, tc.kind)(context.Background(), tc.owner)
			var want []reconcile.Request
			if tc.want != "" {
				want = []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: tc.want}}}
			}
			if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
				t.Fatalf("requests %v, want %v", got, want)
			}
		})
	}
}
