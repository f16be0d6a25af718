package observability

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	// a row of the table of CAPTF's series: | `name` | type | `label`, `label` | ...
	seriesRow = regexp.MustCompile("(?m)^\\| `(captf_[a-z_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	// a row of the table of the other series: | `name`, `name` | `label`, ... (and ...) | ...
	foreignRow = regexp.MustCompile("(?m)^\\| (`(?:controller_runtime|workqueue|apiserver)_[a-z_]+`(?:, `[a-z_]+`)*) \\| ([^|]*) \\|")
	captfName  = regexp.MustCompile(`\bcaptf_[a-z_]+\b`)
	ticked     = regexp.MustCompile("`([^`]+)`")
	alertRow   = regexp.MustCompile(`(?m)^\| (CAPTF[A-Za-z]+) \| ([a-z]+) \| [^|]+ \| \[[A-Za-z]+\]\(runbooks/([A-Za-z]+)\.md\) \|`)
)

func tickedNames(cell string) []string {
	var out []string
	for _, m := range ticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestEverySeriesIsDocumented matches the series gathered from the manager's registry with the
// table of docs/observability.md: each documented with its type and exactly its labels, and the
// page names no CAPTF series that does not exist.
func TestEverySeriesIsDocumented(t *testing.T) {
	doc := readDoc(t)
	gathered := gatherCAPTF(t)
	documented := map[string]bool{}
	for _, m := range seriesRow.FindAllStringSubmatch(doc, -1) {
		name, typ, labels := m[1], m[2], tickedNames(m[3])
		documented[name] = true
		f, ok := gathered[name]
		if !ok {
			t.Errorf("docs/observability.md documents %s, which the manager does not expose", name)
			continue
		}
		if want := strings.ToLower(f.GetType().String()); typ != want {
			t.Errorf("docs/observability.md: %s is a %s, the page says %s", name, want, typ)
		}
		sort.Strings(labels)
		if want := labelNames(f); !slices.Equal(labels, want) {
			t.Errorf("docs/observability.md: %s has the labels %s, the page says %s", name, fmtLabels(want), fmtLabels(labels))
		}
	}
	for name := range gathered {
		if !documented[name] {
			t.Errorf("%s is not in the table of docs/observability.md", name)
		}
	}
	declared := captfSeries(t)
	for _, name := range captfName.FindAllString(doc, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if s, ok := declared[strings.TrimSuffix(name, suffix)]; ok && s.Type == "histogram" {
				base = s.Name
			}
		}
		if _, ok := declared[base]; !ok {
			t.Errorf("docs/observability.md names %s, which is no CAPTF series", name)
		}
	}
}

// TestForeignSeriesAreDocumentedAsTheyAre checks the page's table of controller-runtime's and
// kube-apiserver's series against their source, and that every such series an alert or the
// dashboard uses is in it.
func TestForeignSeriesAreDocumentedAsTheyAre(t *testing.T) {
	doc := readDoc(t)
	foreign := foreignSeries(t)
	documented := map[string]bool{}
	for _, m := range foreignRow.FindAllStringSubmatch(doc, -1) {
		for _, name := range tickedNames(m[1]) {
			documented[name] = true
			s, ok := foreign[name]
			if !ok {
				t.Errorf("docs/observability.md names %s, which is no series of controller-runtime or k8s.io/apiserver", name)
				continue
			}
			for _, l := range tickedNames(m[2]) {
				if !slices.Contains(s.Labels, l) {
					t.Errorf("docs/observability.md: %s has no label %s (it has %v)", name, l, s.Labels)
				}
			}
		}
	}
	series := known(t)
	var exprs []string
	for _, r := range readRules(t) {
		exprs = append(exprs, r.Expr)
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(readDashboard(t).Panels)
	for _, e := range exprs {
		p, err := parsePromQL(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range p.Selectors {
			s, ok := series[sel.Metric]
			if !ok || strings.HasPrefix(s.Name, "captf_") {
				continue
			}
			if !documented[s.Name] {
				t.Errorf("%s is used by an alert or the dashboard but not in docs/observability.md's table", s.Name)
			}
		}
	}
}

// TestEveryAlertIsDocumented checks the page's alert table against rules.yaml: every alert has
// a row with its severity and a link to its runbook, and no row names an alert that is gone.
func TestEveryAlertIsDocumented(t *testing.T) {
	doc := readDoc(t)
	rows := map[string][2]string{}
	for _, m := range alertRow.FindAllStringSubmatch(doc, -1) {
		rows[m[1]] = [2]string{m[2], m[3]}
	}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		row, ok := rows[r.Alert]
		if !ok {
			t.Errorf("alert %s has no row in docs/observability.md's alert table", r.Alert)
			continue
		}
		if row[0] != r.Labels["severity"] {
			t.Errorf("docs/observability.md: %s has severity %s, rules.yaml says %s", r.Alert, row[0], r.Labels["severity"])
		}
		if row[1] != r.Alert {
			t.Errorf("docs/observability.md: %s links the runbook %s.md", r.Alert, row[1])
		}
		delete(rows, r.Alert)
	}
	for a := range rows {
		t.Errorf("docs/observability.md lists an alert %s that rules.yaml does not define", a)
	}
	checkLinks(t, filepath.Join(repoRoot(t), "docs", "observability.md"), doc)
}
