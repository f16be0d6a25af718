package inputs

import (
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestInputsHashIsStable pins the inputs hash of a cluster and a machine, and the hash an
// earlier manager gave the same variables. A change of what is hashed for them makes every
// existing object of the fleet apply again after an upgrade: such a change must be deliberate
// (bump HashVersion, say so in the release notes, and take over the earlier scheme's applied
// hashes as the engine does for LegacyHashVersion), never a side effect (a field added to the
// captf object of every kind, or to spec.module, say). The legacy values are the ones the
// manager before HashVersion v2 wrote into captf.io/applied-hash: the engine takes an object
// over without an apply only when LegacyHash gives exactly them.
func TestInputsHashIsStable(t *testing.T) {
	spec := infrav1.TerraformSpec{Variables: rawVars(`{"size":"small","zones":["a","b"]}`),
		Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "net-module"}}}
	for _, c := range []struct {
		name         string
		in           ContractInputs
		want, legacy string
	}{
		{"cluster", ContractInputs{Kind: infrav1.TerraformClusterKind, Name: "c", Namespace: "golden", ClusterName: "c"},
			"v2-43426e60046c6ba435be68fb5cf6b76676a22f60a0cdbdc09a374f6c5b67bef3",
			"v1-5aa21915e77549042ca80ea5de2ec0496f7a00b90ef11b674c3faa31f4a56927"},
		{"machine", ContractInputs{Kind: infrav1.TerraformMachineKind, Name: "m", Namespace: "golden", ClusterName: "c",
			ControlPlaneEndpoint: &clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}, BootstrapData: "boot",
			FailureDomain: "az1", Version: "v1.36.0"},
			"v2-5e5da5f0b7cbf11253752e51a0a06b0dcb9ca0eb6687e1eaf327ed6a8c077fc8",
			"v1-6880d1a6088d747834402ef871666380a3535be06a6adee89d5964d4b46857ec"},
	} {
		in := mustAssemble(t, fakeReader(t), spec, c.in)
		if in.Hash != c.want {
			t.Errorf("%s: inputs hash %s, want %s", c.name, in.Hash, c.want)
		}
		if got := LegacyHash(in.Variables); got != c.legacy {
			t.Errorf("%s: the earlier manager's hash %s, want %s", c.name, got, c.legacy)
		}
	}
}
