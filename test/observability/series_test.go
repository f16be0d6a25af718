package observability

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// series is one metric family as its source declares it.
type series struct {
	Name string
	// Type is counter, gauge, histogram or summary; empty for a prometheus.NewDesc, whose type
	// is chosen when the collector sends a value.
	Type   string
	Labels []string
	// Where is the file and line that declares it.
	Where string
}

// exposed returns the names a scrape shows for the family: a histogram's _bucket, _sum and
// _count, a summary's _sum and _count besides its own name.
func (s series) exposed() []string {
	switch s.Type {
	case "histogram":
		return []string{s.Name + "_bucket", s.Name + "_sum", s.Name + "_count"}
	case "summary":
		return []string{s.Name, s.Name + "_sum", s.Name + "_count"}
	}
	return []string{s.Name}
}

// labelsOf returns the labels an exposed name carries (a histogram bucket also has le).
func (s series) labelsOf(exposedName string) []string {
	if s.Type == "histogram" && strings.HasSuffix(exposedName, "_bucket") {
		return append(slices.Clone(s.Labels), "le")
	}
	if s.Type == "summary" && exposedName == s.Name {
		return append(slices.Clone(s.Labels), "quantile")
	}
	return s.Labels
}

// constructors are the functions that declare a metric family, in client_golang
// (prometheus.NewCounterVec, ...) and in k8s.io/component-base/metrics, which the API server
// uses with the same names and options.
var constructors = map[string]string{
	"NewCounter": "counter", "NewCounterVec": "counter", "NewGauge": "gauge", "NewGaugeVec": "gauge",
	"NewHistogram": "histogram", "NewHistogramVec": "histogram", "NewSummary": "summary", "NewSummaryVec": "summary",
	"NewDesc": "",
}

// staticSeries reads every metric family the non-test Go files of dirs declare: the options'
// Namespace, Subsystem and Name joined by "_", and the variable labels. A name it cannot read
// statically (not built from string constants) fails the test: series names must be greppable.
func staticSeries(t *testing.T, dirs ...string) map[string]series {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatalf("parse %s: %v", e.Name(), err)
			}
			files = append(files, f)
		}
	}
	// String constants of all those packages, by name (a selector such as
	// metrics.WorkQueueSubsystem resolves by its last part).
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := literal(vs.Values[i], consts); ok {
							consts[n.Name] = s
						}
					}
				}
			}
		}
	}
	out := map[string]series{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			typ, ok := constructors[sel.Sel.Name]
			if !ok || len(call.Args) == 0 {
				return true
			}
			where := fset.Position(call.Pos()).String()
			s := series{Type: typ, Where: where}
			if sel.Sel.Name == "NewDesc" {
				name, ok := literal(call.Args[0], consts)
				if !ok {
					t.Errorf("%s: the series name is not a string constant", where)
					return true
				}
				s.Name = name
				if len(call.Args) > 2 {
					s.Labels = stringList(call.Args[2], consts)
				}
			} else {
				opts := call.Args[0]
				if u, ok := opts.(*ast.UnaryExpr); ok {
					opts = u.X
				}
				lit, ok := opts.(*ast.CompositeLit)
				if !ok {
					return true // options built elsewhere: not a declaration this reader knows
				}
				var parts []string
				for _, field := range []string{"Namespace", "Subsystem", "Name"} {
					for _, el := range lit.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == field {
							v, ok := literal(kv.Value, consts)
							if !ok {
								t.Errorf("%s: %s is not a string constant", where, field)
							}
							if v != "" {
								parts = append(parts, v)
							}
						}
					}
				}
				s.Name = strings.Join(parts, "_")
				if len(call.Args) > 1 {
					s.Labels = stringList(call.Args[1], consts)
				}
			}
			if s.Name == "" {
				return true
			}
			if prev, dup := out[s.Name]; dup && prev.Where != s.Where {
				t.Errorf("series %s is declared twice: %s and %s", s.Name, prev.Where, s.Where)
			}
			out[s.Name] = s
			return true
		})
	}
	return out
}

// literal resolves a string literal, a constant or a concatenation of both.
func literal(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[x.Name]
		return s, ok
	case *ast.SelectorExpr:
		s, ok := consts[x.Sel.Name]
		return s, ok
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := literal(x.X, consts)
		b, ok2 := literal(x.Y, consts)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return literal(x.X, consts)
	}
	return "", false
}

// stringList reads a []string{...} of constants; anything else (nil) is no labels.
func stringList(e ast.Expr, consts map[string]string) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if s, ok := literal(el, consts); ok {
			out = append(out, s)
		}
	}
	return out
}

// repoRoot is two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// captfDirs are the packages whose source may declare a CAPTF series: the metrics package, the
// cache-lag checks, and the admission webhooks.
var captfDirs = []string{"controllers/metrics", "controllers/cachelag", "webhooks"}

// captfSeries reads the CAPTF series from the source.
func captfSeries(t *testing.T) map[string]series {
	t.Helper()
	root := repoRoot(t)
	var dirs []string
	for _, d := range captfDirs {
		dirs = append(dirs, filepath.Join(root, d))
	}
	all := staticSeries(t, dirs...)
	for name, s := range all {
		if !strings.HasPrefix(name, "captf_") {
			t.Errorf("%s: series %s does not start with captf_", s.Where, name)
		}
	}
	if len(all) == 0 {
		t.Fatal("found no CAPTF series in the source")
	}
	return all
}

// moduleDir is where the Go module cache holds a dependency at the version this module's
// build list selects. It asks `go mod download` from outside the module, so a dependency that
// go.sum does not list (the API server's, which only the source-built kube-apiserver needs) is
// fetched through the module proxy without touching go.mod or go.sum.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	moduleDirs.Lock()
	defer moduleDirs.Unlock()
	if d, ok := moduleDirs.m[module]; ok {
		return d
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	version := strings.TrimSpace(string(out))
	cmd = exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", module, version, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s@%s: no folder in %s (%v)", module, version, out, err)
	}
	moduleDirs.m[module] = info.Dir
	return info.Dir
}

// moduleDirs remembers moduleDir's answers for the test binary's life.
var moduleDirs = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// foreignSeries are the series of controller-runtime (the manager's metrics endpoint) and of
// kube-apiserver's admission metrics (scraped from the API server) that the alerts and the
// dashboard may use, read from those modules' source at the versions go.mod selects.
func foreignSeries(t *testing.T) map[string]series {
	t.Helper()
	cr := moduleDir(t, "sigs.k8s.io/controller-runtime")
	api := moduleDir(t, "k8s.io/apiserver")
	all := staticSeries(t,
		filepath.Join(cr, "pkg/internal/controller/metrics"), // controller_runtime_reconcile_*
		filepath.Join(cr, "pkg/internal/metrics"),            // workqueue_*
		filepath.Join(cr, "pkg/metrics"),                     // rest_client_*, leader_election_*, the workqueue keys
		filepath.Join(cr, "pkg/webhook/internal/metrics"),    // controller_runtime_webhook_*
		filepath.Join(cr, "pkg/certwatcher/metrics"),         // certwatcher_*
	)
	for name, s := range staticSeries(t, filepath.Join(api, "pkg/admission/metrics")) {
		all[name] = s
	}
	return all
}

// TestForeignSeriesAreReadFromTheirSource keeps the reader of foreignSeries honest: the series
// the alerts rely on come out with the labels their source declares.
func TestForeignSeriesAreReadFromTheirSource(t *testing.T) {
	all := foreignSeries(t)
	want := map[string][]string{
		"controller_runtime_reconcile_total":          {"controller", "result"},
		"controller_runtime_reconcile_errors_total":   {"controller"},
		"controller_runtime_reconcile_time_seconds":   {"controller"},
		"controller_runtime_webhook_requests_total":   {"webhook", "code"},
		"controller_runtime_webhook_latency_seconds":  {"webhook"},
		"workqueue_depth":                             {"name", "controller", "priority"},
		"workqueue_queue_duration_seconds":            {"name", "controller"},
		"apiserver_admission_webhook_rejection_count": {"name", "type", "operation", "error_type", "rejection_code"},
		"apiserver_admission_webhook_fail_open_count": {"name", "type"},
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s, ok := all[n]
		if !ok {
			t.Errorf("%s: not found in the source of controller-runtime or k8s.io/apiserver", n)
			continue
		}
		if !slices.Equal(s.Labels, want[n]) {
			t.Errorf("%s (%s): labels %v, want %v", n, s.Where, s.Labels, want[n])
		}
	}
	if got := all["controller_runtime_reconcile_time_seconds"].Type; got != "histogram" {
		t.Errorf("controller_runtime_reconcile_time_seconds: type %q, want histogram", got)
	}
}

func fmtLabels(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return fmt.Sprint(l)
}
