package observability

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// selector is one vector selector of a PromQL expression: the series it names and the label
// names of its matchers.
type selector struct {
	Metric string
	Labels []string
}

// parsed is what the checks need of a PromQL expression.
type parsed struct {
	Selectors []selector
	// Grouping are the label names of by, without, on, ignoring, group_left and group_right.
	Grouping []string
}

// aggregations and keywords are PromQL words that are never series names.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

var groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// parsePromQL reads the selectors and grouping labels of an expression. It is a tokenizer, not
// a full parser (promtool checks the syntax of the rules): it knows strings, label matchers,
// ranges, numbers and durations, Grafana's $variables, functions (a word before "("),
// aggregations and keywords; every other word is a series name.
func parsePromQL(expr string) (parsed, error) {
	var p parsed
	i, n := 0, len(expr)
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\n' || expr[j] == '\t' || expr[j] == '\r') {
			j++
		}
		return j
	}
	skipString := func(j int) (int, error) {
		q := expr[j]
		for j++; j < n; j++ {
			if expr[j] == '\\' && q != '`' {
				j++
				continue
			}
			if expr[j] == q {
				return j + 1, nil
			}
		}
		return n, fmt.Errorf("unterminated string in %q", expr)
	}
	// matchers reads {a="x", b=~"y"} from j (at '{') and returns the label names.
	matchers := func(j int) ([]string, int, error) {
		var labels []string
		for j++; j < n; {
			j = skipSpace(j)
			switch {
			case j >= n:
				return nil, n, fmt.Errorf("unterminated matchers in %q", expr)
			case expr[j] == '}':
				return labels, j + 1, nil
			case expr[j] == ',':
				j++
			case expr[j] == '"' || expr[j] == '\'' || expr[j] == '`':
				var err error
				if j, err = skipString(j); err != nil {
					return nil, n, err
				}
			case isIdentStart(expr[j]):
				k := j
				for k < n && isIdent(expr[k]) {
					k++
				}
				labels = append(labels, expr[j:k])
				j = k
			case strings.ContainsRune("=!~", rune(expr[j])):
				j++
			default:
				return nil, n, fmt.Errorf("unexpected %q in the matchers of %q", expr[j], expr)
			}
		}
		return nil, n, fmt.Errorf("unterminated matchers in %q", expr)
	}
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			var err error
			if i, err = skipString(i); err != nil {
				return p, err
			}
		case c == '[':
			k := strings.IndexByte(expr[i:], ']')
			if k < 0 {
				return p, fmt.Errorf("unterminated range in %q", expr)
			}
			i += k + 1
		case c == '$':
			i++
			if i < n && expr[i] == '{' {
				k := strings.IndexByte(expr[i:], '}')
				if k < 0 {
					return p, fmt.Errorf("unterminated variable in %q", expr)
				}
				i += k + 1
				continue
			}
			for i < n && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || (c == '.' && i+1 < n && expr[i+1] >= '0' && expr[i+1] <= '9'):
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '{':
			labels, j, err := matchers(i)
			if err != nil {
				return p, err
			}
			// {__name__="x"} without a name before it is not used here; matchers alone name no series.
			p.Selectors = append(p.Selectors, selector{Labels: labels})
			i = j
		case isIdentStart(c):
			k := i
			for k < n && isIdent(expr[k]) {
				k++
			}
			word := expr[i:k]
			j := skipSpace(k)
			switch {
			case groupingWords[word]:
				if j < n && expr[j] == '(' {
					end := strings.IndexByte(expr[j:], ')')
					if end < 0 {
						return p, fmt.Errorf("unterminated %s list in %q", word, expr)
					}
					for _, l := range strings.Split(expr[j+1:j+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							p.Grouping = append(p.Grouping, l)
						}
					}
					k = j + end + 1
				}
			case keywords[word], aggregations[word]:
			case j < n && expr[j] == '(':
				// a function call: its arguments are read as the loop goes on
			default:
				sel := selector{Metric: word}
				if j < n && expr[j] == '{' {
					labels, end, err := matchers(j)
					if err != nil {
						return p, err
					}
					sel.Labels = labels
					k = end
				}
				p.Selectors = append(p.Selectors, sel)
			}
			i = k
		default:
			i++
		}
	}
	return p, nil
}

// TestParsePromQL pins the tokenizer the expression checks rely on.
func TestParsePromQL(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		metrics  []string
		labels   []string
		grouping []string
	}{
		{expr: `sum by (kind, operation) (increase(captf_jobs_finished_total{outcome="Failed"}[1h])) >= 3`,
			metrics: []string{"captf_jobs_finished_total"}, labels: []string{"outcome"}, grouping: []string{"kind", "operation"}},
		{expr: "histogram_quantile(0.95, sum by (le, operation) (rate(captf_job_duration_seconds_bucket{kind=~\"$kind\"}[$__rate_interval])))",
			metrics: []string{"captf_job_duration_seconds_bucket"}, labels: []string{"kind"}, grouping: []string{"le", "operation"}},
		{expr: `(sum by (guard) (x{outcome="o"} unless x{outcome="o"} offset 15m) > 0) or max(y) without(pod)`,
			metrics: []string{"x", "x", "y"}, labels: []string{"outcome", "outcome"}, grouping: []string{"guard", "pod"}},
		{expr: `a / on (kind) group_left (reason) b{name=~".+\\.captf\\.io", error_type!="x,y}"} * 1e3 > 0.1`,
			metrics: []string{"a", "b"}, labels: []string{"name", "error_type"}, grouping: []string{"kind", "reason"}},
		{expr: `max by(kind)(captf_plans_awaiting_approval)`, metrics: []string{"captf_plans_awaiting_approval"}, grouping: []string{"kind"}},
	} {
		p, err := parsePromQL(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		var metrics, labels []string
		for _, s := range p.Selectors {
			metrics = append(metrics, s.Metric)
			labels = append(labels, s.Labels...)
		}
		if !slices.Equal(metrics, tc.metrics) || !slices.Equal(labels, tc.labels) || !slices.Equal(p.Grouping, tc.grouping) {
			t.Errorf("%s:\n got metrics %v labels %v grouping %v\nwant metrics %v labels %v grouping %v",
				tc.expr, metrics, labels, p.Grouping, tc.metrics, tc.labels, tc.grouping)
		}
	}
}

// targetLabels are the labels Prometheus adds to every scraped series (the Prometheus Operator's
// PodMonitor and ServiceMonitor add these).
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "container": true, "service": true, "endpoint": true}

// known maps every exposed series name (a histogram's _bucket, _sum, _count) to its family.
func known(t *testing.T) map[string]series {
	t.Helper()
	out := map[string]series{}
	add := func(all map[string]series) {
		for _, s := range all {
			for _, e := range s.exposed() {
				out[e] = s
			}
		}
	}
	add(captfSeries(t))
	add(foreignSeries(t))
	return out
}

// checkExpr fails when an expression names a series that does not exist, matches on a label the
// series does not carry, or groups by a label none of its series carries.
func checkExpr(t *testing.T, where, expr string, series map[string]series) {
	t.Helper()
	p, err := parsePromQL(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(p.Selectors) == 0 {
		t.Errorf("%s: the expression names no series: %s", where, expr)
	}
	carried := map[string]bool{}
	for l := range targetLabels {
		carried[l] = true
	}
	for _, sel := range p.Selectors {
		if sel.Metric == "" {
			t.Errorf("%s: a selector without a series name: %s", where, expr)
			continue
		}
		s, ok := series[sel.Metric]
		if !ok {
			t.Errorf("%s: %s is no series of CAPTF, controller-runtime or kube-apiserver", where, sel.Metric)
			continue
		}
		labels := s.labelsOf(sel.Metric)
		for _, l := range labels {
			carried[l] = true
		}
		for _, l := range sel.Labels {
			if !slices.Contains(labels, l) && !targetLabels[l] {
				t.Errorf("%s: %s has no label %q (it has %v)", where, sel.Metric, l, labels)
			}
		}
	}
	for _, l := range p.Grouping {
		if !carried[l] {
			t.Errorf("%s: groups by %q, which none of its series carries", where, l)
		}
	}
}
