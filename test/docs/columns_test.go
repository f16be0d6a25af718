package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDocumentedPrinterColumnsAreTheCRDs holds the `kubectl get` header of docs/api.md to the
// TerraformCluster CRD's printer columns (those kubectl shows without -o wide), so a column
// added or renamed in the API fails here until the page shows it.
func TestDocumentedPrinterColumnsAreTheCRDs(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "infrastructure.cluster.x-k8s.io_terraformclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name    string `json:"name"`
				Columns []struct {
					Name     string `json:"name"`
					Priority int    `json:"priority"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil || len(crd.Spec.Versions) != 1 {
		t.Fatalf("read the CRD (%d versions): %v", len(crd.Spec.Versions), err)
	}
	want := []string{"NAME"}
	for _, c := range crd.Spec.Versions[0].Columns {
		if c.Priority == 0 {
			want = append(want, strings.ToUpper(c.Name))
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	found := false
	for i, line := range lines {
		if strings.TrimSpace(line) != "$ kubectl get tfc" || i+1 >= len(lines) {
			continue
		}
		found = true
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("docs/api.md:%d: kubectl get tfc shows %v, the CRD's columns are %v", i+2, got, want)
		}
	}
	if !found {
		t.Fatal("docs/api.md shows no `$ kubectl get tfc` output")
	}
}
