package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The krew manifest (hack/krew/captf.yaml) names this binary on every platform, and each
// platform's archive and SHA-256 placeholder are the ones hack/krew/release.sh builds and fills.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "hack", "krew", "captf.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "captf" || m.Spec.Version != "RELEASE_TAG" || m.Spec.ShortDescription == "" {
		t.Fatalf("header: %+v", m)
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "krew", "release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != 4 {
		t.Fatalf("platforms: %d", len(m.Spec.Platforms))
	}
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		if p.Bin != "kubectl-captf" || p.SHA256 != "SHA256_"+os+"_"+arch ||
			!strings.HasSuffix(p.URI, "/releases/download/RELEASE_TAG/kubectl-captf_"+os+"_"+arch+".tar.gz") {
			t.Errorf("platform %s/%s: %+v", os, arch, p)
		}
		if !strings.Contains(string(script), os+"/"+arch) {
			t.Errorf("release.sh does not build %s/%s", os, arch)
		}
	}
}
