package observability

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// render builds an overlay of config/default with the config/prometheus component, the way
// docs/observability.md tells operators to, with bin/kustomize (make test-bins builds it).
func render(t *testing.T, namespace string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("bin/kustomize is missing: run 'make test-bins' (it builds it from source): %v", err)
	}
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	if namespace != "" {
		k += "namespace: " + namespace + "\n"
	}
	k += "resources:\n- " + rel("config/default") + "\ncomponents:\n- " + rel("config/prometheus") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build: %v: %s", err, stderr.String())
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

// TestComponentRendersWithConfigDefault renders the component into config/default, as is and
// moved to another namespace: the PodMonitor selects the manager's pods by labels they carry, on
// a port the manager container declares, in the manager's namespace; the PrometheusRule is
// rules.yaml and the dashboard ConfigMap holds dashboard.json unchanged.
func TestComponentRendersWithConfigDefault(t *testing.T) {
	root := repoRoot(t)
	dashboard, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	rulesRaw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesDoc := map[string]any{}
	if err := yaml.Unmarshal(rulesRaw, &rulesDoc); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"", "platform-capi"} {
		objs := render(t, ns)
		want := ns
		if want == "" {
			want = "captf-system"
		}
		deploy, pm, pr, cm := find(objs, "Deployment"), find(objs, "PodMonitor"), find(objs, "PrometheusRule"), find(objs, "ConfigMap")
		if deploy == nil || pm == nil || pr == nil || cm == nil {
			t.Fatalf("namespace %q: rendered Deployment %v, PodMonitor %v, PrometheusRule %v, ConfigMap %v", ns, deploy != nil, pm != nil, pr != nil, cm != nil)
		}
		for _, o := range []*unstructured.Unstructured{deploy, pm, pr, cm} {
			if o.GetNamespace() != want {
				t.Errorf("namespace %q: %s %s is in %q, want %q", ns, o.GetKind(), o.GetName(), o.GetNamespace(), want)
			}
		}
		podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
		selector, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
		if len(selector) == 0 {
			t.Errorf("the PodMonitor selects no labels")
		}
		for k, v := range selector {
			if podLabels[k] != v {
				t.Errorf("the PodMonitor selects %s=%s, which the manager's pods do not carry (%v)", k, v, podLabels)
			}
		}
		endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		ports := map[string]bool{}
		var args []any
		for _, c := range containers {
			cm := c.(map[string]any)
			if cm["name"] == "manager" {
				args, _ = cm["args"].([]any)
			}
			ps, _ := cm["ports"].([]any)
			for _, p := range ps {
				ports[p.(map[string]any)["name"].(string)] = true
			}
		}
		if len(endpoints) != 1 {
			t.Fatalf("the PodMonitor has %d endpoints, want 1", len(endpoints))
		}
		if port := endpoints[0].(map[string]any)["port"]; !ports[port.(string)] {
			t.Errorf("the PodMonitor scrapes port %v, which the manager does not declare (%v)", port, ports)
		}
		found := false
		for _, a := range args {
			if a == "--metrics-bind-address=:8080" {
				found = true
			}
		}
		if !found {
			t.Errorf("the manager's args %v do not serve metrics on :8080, which the metrics port names", args)
		}
		if !reflect.DeepEqual(pr.Object["spec"], rulesDoc["spec"]) {
			t.Errorf("the rendered PrometheusRule's spec differs from rules.yaml")
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if data["captf.json"] != string(dashboard) {
			t.Errorf("the dashboard ConfigMap does not hold dashboard.json unchanged")
		}
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("the dashboard ConfigMap lacks the label grafana_dashboard=1: %v", cm.GetLabels())
		}
	}
}
