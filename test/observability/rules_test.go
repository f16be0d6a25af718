package observability

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runbookBase is where each alert's runbook_url points: docs/runbooks/<alert>.md on the
// repository's default branch.
const runbookBase = "https://github.com/captf/cluster-api-provider-terraform/blob/main/docs/runbooks/"

// prometheusRule is the part of a monitoring.coreos.com/v1 PrometheusRule the checks read.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T) []rule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil {
		t.Fatalf("config/prometheus/rules.yaml: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("config/prometheus/rules.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	var out []rule
	for _, g := range pr.Spec.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("config/prometheus/rules.yaml has no rules")
	}
	return out
}

// TestRulesNameOnlyExistingSeries checks every alert expression against the series that exist.
func TestRulesNameOnlyExistingSeries(t *testing.T) {
	series := known(t)
	for _, r := range readRules(t) {
		checkExpr(t, "rules.yaml "+r.Alert+r.Record, r.Expr, series)
	}
}

// TestEveryAlertHasARunbookAndADescription checks each alert's labels and annotations, and that
// its runbook page exists and says how it was exercised.
func TestEveryAlertHasARunbookAndADescription(t *testing.T) {
	root := repoRoot(t)
	seen := map[string]bool{}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if !strings.HasPrefix(r.Alert, "CAPTF") {
			t.Errorf("alert %s: names start with CAPTF", r.Alert)
		}
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		if want := runbookBase + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		page := filepath.Join(root, "docs", "runbooks", r.Alert+".md")
		b, err := os.ReadFile(page)
		if err != nil {
			t.Errorf("alert %s: its runbook: %v", r.Alert, err)
			continue
		}
		checkRunbook(t, "docs/runbooks/"+r.Alert+".md", string(b))
		if !strings.Contains(string(b), r.Alert) {
			t.Errorf("docs/runbooks/%s.md does not name the alert", r.Alert)
		}
	}
}

var exercised = regexp.MustCompile(`(?m)^## (Exercised|Rehearsed)`)

// checkRunbook: a runbook names the kubectl commands to diagnose and fix, and says how it was
// exercised (or why it could not be).
func checkRunbook(t *testing.T, name, text string) {
	t.Helper()
	if !strings.Contains(text, "kubectl ") {
		t.Errorf("%s names no kubectl command", name)
	}
	if !exercised.MatchString(text) {
		t.Errorf("%s has no \"## Exercised\" section saying how it was exercised", name)
	}
}

// TestEveryRunbookIsComplete checks every page of docs/runbooks/, the ones no alert points at
// too (stale lock, stuck destroy, webhook unavailable, break-glass, state lost), and that every
// relative link between runbooks and docs resolves.
func TestEveryRunbookIsComplete(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "docs", "runbooks")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		pages[e.Name()] = true
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		checkRunbook(t, "docs/runbooks/"+e.Name(), string(b))
		checkLinks(t, filepath.Join(dir, e.Name()), string(b))
	}
	for _, p := range []string{"stale-lock.md", "state-lost-and-restore.md", "stuck-destroy.md", "webhook-unavailable.md", "break-glass.md"} {
		if !pages[p] {
			t.Errorf("docs/runbooks/%s is missing", p)
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// checkLinks fails on a relative Markdown link to a file that does not exist, or to a heading
// that the target page does not have.
func checkLinks(t *testing.T, path, text string) {
	t.Helper()
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.Contains(target, "://") {
			continue
		}
		full := filepath.Join(filepath.Dir(path), target)
		info, err := os.Stat(full)
		if err != nil {
			t.Errorf("%s links %s, which does not exist", path, target)
			continue
		}
		anchor := strings.TrimPrefix(m[2], "#")
		if anchor == "" || info.IsDir() {
			continue
		}
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(anchors(string(b)), anchor) {
			t.Errorf("%s links %s#%s, which has no such heading", path, target, anchor)
		}
	}
}

// anchors are the GitHub anchors of a page's headings.
func anchors(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out = append(out, b.String())
	}
	return out
}

// promtoolTests is the part of a promtool rule test file the coverage check reads.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name       string `json:"name"`
		AlertTests []struct {
			EvalTime  string           `json:"eval_time"`
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasAFiringAndANonFiringCase reads config/prometheus/tests: every alert must be
// expected to fire in one case and expected not to fire in another (promtool itself, in
// `make test-rules`, checks that they do).
func TestEveryAlertHasAFiringAndANonFiringCase(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "config", "prometheus", "tests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files in config/prometheus/tests (%v)", err)
	}
	firing, quiet := map[string]int{}, map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var pt promtoolTests
		if err := yaml.Unmarshal(raw, &pt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(pt.RuleFiles) != 1 || pt.RuleFiles[0] != "rules.yaml" {
			t.Errorf("%s: rule_files %v, want [rules.yaml] (make test-rules writes the PrometheusRule's spec there)", f, pt.RuleFiles)
		}
		for _, tc := range pt.Tests {
			for _, at := range tc.AlertTests {
				if len(at.ExpAlerts) > 0 {
					firing[at.Alertname]++
				} else {
					quiet[at.Alertname]++
				}
			}
		}
	}
	var alerts []string
	for _, r := range readRules(t) {
		if r.Alert != "" {
			alerts = append(alerts, r.Alert)
		}
	}
	sort.Strings(alerts)
	for _, a := range alerts {
		t.Logf("%-28s firing cases %d, non-firing cases %d", a, firing[a], quiet[a])
		if firing[a] == 0 {
			t.Errorf("alert %s has no promtool case where it fires", a)
		}
		if quiet[a] == 0 {
			t.Errorf("alert %s has no promtool case where it does not fire", a)
		}
		delete(firing, a)
		delete(quiet, a)
	}
	for a := range firing {
		t.Errorf("config/prometheus/tests expects an alert %s that rules.yaml does not define", a)
	}
	for a := range quiet {
		t.Errorf("config/prometheus/tests tests an alert %s that rules.yaml does not define", a)
	}
}
