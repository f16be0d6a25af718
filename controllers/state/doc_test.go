package state_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// TestModuleContractDocCoversOutputs keeps docs/module-contract.md in step with this package.
func TestModuleContractDocCoversOutputs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "module-contract.md"))
	if err != nil {
		t.Fatalf("read the module contract: %v", err)
	}
	doc := string(b)
	for _, w := range []string{
		state.OutputControlPlaneEndpoint, state.OutputFailureDomains, state.OutputProviderID, state.OutputAddresses,
		state.OutputFailureDomain, state.OutputProviderIDList, state.OutputReplicas, state.OutputInstances, state.OutputHealth,
	} {
		if !strings.Contains(doc, "| `"+w+"` |") {
			t.Errorf("docs/module-contract.md has no table row for the output %s", w)
		}
		if !strings.Contains(doc, `output "`+w+`"`) {
			t.Errorf("docs/module-contract.md has no HCL example for the output %s", w)
		}
	}
	for _, w := range []string{infrav1.OutputMissingReason, infrav1.OutputInvalidReason, "`" + state.StateKey + "`", state.MoveLabel,
		"Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"} {
		if !strings.Contains(doc, w) {
			t.Errorf("docs/module-contract.md does not mention %s", w)
		}
	}
}
