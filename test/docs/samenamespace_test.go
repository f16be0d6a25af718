package docs

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestReferencesStayInTheirNamespace keeps docs/cluster-api.md's "Templates and namespaces"
// true: no field of a namespaced CAPTF kind's spec can name another namespace (a module
// ConfigMap, a Secret, a template: every reference is a name in the object's own namespace).
// A CRD that grows a field named namespace anywhere under spec fails here, so the page, and a
// refusal with what to do, come with it.
func TestReferencesStayInTheirNamespace(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		crd := readCRD(t, f)
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			continue // TerraformPlanPolicy: cluster-scoped, it selects namespaces by label
		}
		for _, v := range crd.Spec.Versions {
			spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
			if !ok {
				t.Fatalf("%s %s has no spec", crd.Name, v.Name)
			}
			var found []string
			walkSchema("spec", spec, func(path string) { found = append(found, path) })
			sort.Strings(found)
			if len(found) > 0 {
				t.Errorf("%s %s can name another namespace at %s: refuse it with what to do, and say so in docs/cluster-api.md, \"Templates and namespaces\"",
					crd.Name, v.Name, strings.Join(found, ", "))
			}
			checked++
		}
	}
	if checked != 6 {
		t.Errorf("checked %d namespaced CRD versions, want the 6 kinds", checked)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "cluster-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "## Templates and namespaces") {
		t.Error("docs/cluster-api.md has no section \"Templates and namespaces\"")
	}
}

// walkSchema calls found with the path of every property named namespace under s.
func walkSchema(path string, s apiextensionsv1.JSONSchemaProps, found func(string)) {
	for name, p := range s.Properties {
		if name == "namespace" {
			found(path + "." + name)
		}
		walkSchema(path+"."+name, p, found)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(path+"[]", *s.Items.Schema, found)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(path+"{}", *s.AdditionalProperties.Schema, found)
	}
}
