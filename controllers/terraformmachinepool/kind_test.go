package terraformmachinepool_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachinepool"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func parse(t *testing.T, s statetest.State) *state.State {
	t.Helper()
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// withInstances is a pool's state whose instances output reports ready for each provider ID.
func withInstances(ready map[string]bool, ids ...string) statetest.State {
	s := statetest.MachinePool(ids...)
	list := []map[string]any{}
	for _, id := range ids {
		in := map[string]any{"provider_id": id, "ready": ready[id]}
		if !ready[id] {
			in["message"] = "booting"
		}
		list = append(list, in)
	}
	s.Outputs[state.OutputInstances] = statetest.Output{Value: list}
	return s
}

// TestPoolOutputsFillTheStatus maps a pool module's outputs onto the object: the instances and
// their ready count, cleared again when a later apply has no instances output, and nothing
// changed by outputs the contract refuses.
func TestPoolOutputsFillTheStatus(t *testing.T) {
	kind := terraformmachinepool.Kind()
	tp := objects.MachinePool("ns", "p").Obj()

	if err := kind.ApplyOutputs(tp, parse(t, withInstances(map[string]bool{"p://a": true}, "p://a", "p://b"))); err != nil {
		t.Fatalf("apply outputs: %v", err)
	}
	want := []infrav1.TerraformMachinePoolInstance{{ProviderID: "p://a", Ready: true}, {ProviderID: "p://b", Message: "booting"}}
	if !equality.Semantic.DeepEqual(tp.Status.Instances, want) {
		t.Errorf("status.instances = %+v, want %+v", tp.Status.Instances, want)
	}
	if got := ptr.Deref(tp.Status.ReadyInstances, -1); got != 1 {
		t.Errorf("status.readyInstances = %d, want 1", got)
	}
	if got := ptr.Deref(tp.Status.Replicas, -1); got != 2 || len(tp.Spec.ProviderIDList) != 2 || !tp.Status.Ready {
		t.Errorf("replicas %d, providerIDList %v, ready %v: want 2, two IDs, true", got, tp.Spec.ProviderIDList, tp.Status.Ready)
	}

	before := tp.DeepCopy()
	stray := withInstances(map[string]bool{"p://a": true, "p://z": true}, "p://a", "p://z")
	stray.Outputs[state.OutputProviderIDList] = statetest.Output{Value: []string{"p://a"}}
	err := kind.ApplyOutputs(tp, parse(t, stray))
	if oe, ok := state.AsOutputError(err); !ok || oe.Reason != infrav1.OutputInvalidReason || oe.Output != state.OutputInstances {
		t.Fatalf("an instance the pool does not list: want OutputInvalid on instances, got %v", err)
	}
	if !equality.Semantic.DeepEqual(tp, before) {
		t.Errorf("refused outputs changed the object: %+v", tp)
	}

	if err := kind.ApplyOutputs(tp, parse(t, statetest.MachinePool("p://a"))); err != nil {
		t.Fatalf("apply outputs without instances: %v", err)
	}
	if tp.Status.Instances != nil || tp.Status.ReadyInstances != nil {
		t.Errorf("without an instances output: instances %+v, readyInstances %v; want both unset", tp.Status.Instances, tp.Status.ReadyInstances)
	}
}
