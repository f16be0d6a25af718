package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/captf/cluster-api-provider-terraform/"

// productImports maps every folder of the module that holds a non-test Go file to the CAPTF
// packages those files import (folders relative to root, slash-separated).
func productImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// testdata holds no package of the product: the go tool ignores it.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bin" || rel == "config" || rel == "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		set := out[pkg]
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if own, ok := strings.CutPrefix(p, modulePath); ok && !slices.Contains(set, own) {
				set = append(set, own)
			}
		}
		out[pkg] = set
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	codeSpan     = regexp.MustCompile("`([^`]+)`")
	layerHeading = regexp.MustCompile(`^## Layer (\d+):`)
)

// testLayer is the layer the page's "Test infrastructure" section stands for: above the product.
const testLayer = 6

// architectureRows reads docs/architecture.md's tables: for each package named in a row's
// first cell, the CAPTF packages its third cell lists ("-": none), and the layer of the section
// the row stands in ("## Layer N", or testLayer for the test infrastructure).
func architectureRows(t *testing.T, root string) (map[string][]string, map[string]int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, layers := map[string][]string{}, map[string]int{}
	layer := 0
	for _, line := range strings.Split(string(b), "\n") {
		if m := layerHeading.FindStringSubmatch(line); m != nil {
			layer, _ = strconv.Atoi(m[1])
		} else if strings.HasPrefix(line, "## Test infrastructure") {
			layer = testLayer
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var allowed []string
		for _, m := range codeSpan.FindAllStringSubmatch(cells[3], -1) {
			allowed = append(allowed, m[1])
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("docs/architecture.md lists %s twice", m[1])
			}
			rows[m[1]], layers[m[1]] = allowed, layer
		}
	}
	return rows, layers
}

// TestArchitectureListsEveryPackageAndItsImports holds docs/architecture.md against the code:
// every folder with production Go files has a row, every row names such a folder, a row lists
// exactly the CAPTF packages its package imports, and no import runs up a layer. A new import
// is a design change made in that page first.
func TestArchitectureListsEveryPackageAndItsImports(t *testing.T) {
	root := repoRoot(t)
	code := productImports(t, root)
	doc, layers := architectureRows(t, root)
	if len(doc) < 20 {
		t.Fatalf("docs/architecture.md: %d package rows read; the table format changed?", len(doc))
	}
	for pkg, imports := range code {
		allowed, ok := doc[pkg]
		if !ok {
			t.Errorf("package %s is not in docs/architecture.md", pkg)
			continue
		}
		sort.Strings(imports)
		sort.Strings(allowed)
		for _, imp := range imports {
			if !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow", pkg, imp)
			}
		}
		for _, a := range allowed {
			if !slices.Contains(imports, a) {
				t.Errorf("docs/architecture.md lets %s import %s, which it does not: the row says more than the code", pkg, a)
			}
		}
	}
	for pkg, allowed := range doc {
		if _, ok := code[pkg]; !ok {
			t.Errorf("docs/architecture.md lists %s, which holds no production Go file", pkg)
		}
		// Imports run down the layers, never up; the sandbox's entry point is the one product
		// package that imports the test infrastructure it starts.
		for _, imp := range allowed {
			if layers[imp] > layers[pkg] && !(pkg == "cmd/sandbox" && layers[imp] == testLayer) {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import that runs back up", pkg, layers[pkg], imp, layers[imp])
			}
		}
	}
}
