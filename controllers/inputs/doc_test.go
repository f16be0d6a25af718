package inputs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestModuleContractDocCoversInputs keeps docs/module-contract.md in step with this package.
func TestModuleContractDocCoversInputs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "module-contract.md"))
	if err != nil {
		t.Fatalf("read the module contract: %v", err)
	}
	doc := string(b)
	var want []string
	for _, f := range PoolContractFields() {
		want = append(want, "`"+f+"`")
	}
	for _, n := range ReservedVariableNames() {
		want = append(want, "`"+n+"`")
	}
	want = append(want, strconv.Itoa(MaxRunSecretBytes), `variable "captf"`, "type = any",
		infrav1.InputsSourceMissingReason, infrav1.InvalidInputsReason, infrav1.InputsTooLargeReason)
	for _, w := range want {
		if !strings.Contains(doc, w) {
			t.Errorf("docs/module-contract.md does not mention %s", w)
		}
	}
}
