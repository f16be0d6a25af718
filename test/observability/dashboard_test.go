package observability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			Query      any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "prometheus", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("config/prometheus/dashboard.json: %v", err)
	}
	return d
}

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// TestDashboardNamesOnlyExistingSeries checks every query of config/prometheus/dashboard.json:
// each panel's PromQL and each template variable's label_values() names a series that exists,
// with labels it carries; every panel reads the dashboard's Prometheus data source variable.
func TestDashboardNamesOnlyExistingSeries(t *testing.T) {
	d := readDashboard(t)
	series := known(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	ids := map[int]bool{}
	queries := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d is used twice", p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not read the ${datasource} Prometheus data source", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				checkExpr(t, "dashboard panel "+p.Title+" "+tg.RefID, tg.Expr, series)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("template variable %s: %q is not label_values(<series>, <label>)", v.Name, v.Definition)
			continue
		}
		queries++
		s, ok := series[m[1]]
		if !ok {
			t.Errorf("template variable %s: %s is no series", v.Name, m[1])
		} else if !slices.Contains(s.labelsOf(m[1]), m[2]) {
			t.Errorf("template variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
	t.Logf("%d queries checked in %d panels", queries, len(ids))
}
