package inputs

import (
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestInputsHashIsStable pins the inputs hash of a cluster and a machine. A change of what is
// hashed for them makes every existing object of the fleet apply again after an upgrade: such a
// change must be deliberate (bump HashVersion and say so in the release notes), never a side
// effect (a field added to the captf object of every kind, say).
func TestInputsHashIsStable(t *testing.T) {
	spec := infrav1.TerraformSpec{Variables: rawVars(`{"size":"small","zones":["a","b"]}`)}
	for _, c := range []struct {
		name string
		in   ContractInputs
		want string
	}{
		{"cluster", ContractInputs{Kind: infrav1.TerraformClusterKind, Name: "c", Namespace: "golden", ClusterName: "c"},
			"v1-5aa21915e77549042ca80ea5de2ec0496f7a00b90ef11b674c3faa31f4a56927"},
		{"machine", ContractInputs{Kind: infrav1.TerraformMachineKind, Name: "m", Namespace: "golden", ClusterName: "c",
			ControlPlaneEndpoint: &clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}, BootstrapData: "boot",
			FailureDomain: "az1", Version: "v1.36.0"},
			"v1-6880d1a6088d747834402ef871666380a3535be06a6adee89d5964d4b46857ec"},
	} {
		if got := mustAssemble(t, fakeReader(t), spec, c.in).Hash; got != c.want {
			t.Errorf("%s: inputs hash %s, want %s", c.name, got, c.want)
		}
	}
}
