package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestScaleFromZeroReasonHolds keeps docs/cluster-api.md's "Scale from zero" true: it says CAPTF
// fills no capacity for the cluster autoscaler because a TerraformMachineTemplate has no status
// (the InfraMachineTemplate contract's status.capacity and status.nodeInfo). A template CRD that
// grows a status fails here, so the page changes with it.
func TestScaleFromZeroReasonHolds(t *testing.T) {
	root := repoRoot(t)
	crd := readCRD(t, filepath.Join(root, "config", "crd", "bases", "infrastructure.cluster.x-k8s.io_terraformmachinetemplates.yaml"))
	if len(crd.Spec.Versions) == 0 {
		t.Fatal("the TerraformMachineTemplate CRD has no version")
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || len(v.Schema.OpenAPIV3Schema.Properties) == 0 {
			t.Fatalf("version %s of the TerraformMachineTemplate CRD has no schema", v.Name)
		}
		if _, ok := v.Schema.OpenAPIV3Schema.Properties["status"]; ok || v.Subresources != nil && v.Subresources.Status != nil {
			t.Errorf("version %s of the TerraformMachineTemplate CRD has a status now: say in docs/cluster-api.md, \"Scale from zero\", what it reports to the cluster autoscaler", v.Name)
		}
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "cluster-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Scale from zero", "capacity.cluster-autoscaler.kubernetes.io/cpu", "capacity.cluster-autoscaler.kubernetes.io/memory"} {
		if !strings.Contains(string(page), w) {
			t.Errorf("docs/cluster-api.md does not say %q", w)
		}
	}
}

// readCRD reads a CRD manifest.
func readCRD(t *testing.T, path string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}
