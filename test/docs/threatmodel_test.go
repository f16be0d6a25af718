package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testRef is one test a row of the threat model's attack table names: a package folder and the
// text of a spec or the name of a Go test, as "`folder` \"text\"".
var testRef = regexp.MustCompile("`([a-z0-9_./-]+)` \"([^\"]+)\"")

// minRefText keeps a reference from naming a test by a word that any file contains.
const minRefText = 12

// TestThreatModelNamesTestsThatExist reads the attack table of docs/threat-model.md: every row
// has an ID of its own and names at least one test, and every test it names exists: the folder holds a _test.go file
// that contains the text (a Ginkgo spec's text, or a prefix of it, or a Go test's name). A row
// whose test is renamed or deleted fails here, so the table never claims a proof that is gone.
func TestThreatModelNamesTestsThatExist(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := attackRows(string(b))
	if len(rows) < 10 {
		t.Fatalf("found %d rows in the attack table of docs/threat-model.md; the parser lost them", len(rows))
	}
	sources := map[string]string{}
	seen := map[string]bool{}
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		id := strings.TrimSpace(cells[0])
		if seen[id] {
			t.Errorf("docs/threat-model.md has two rows %s: an ID names one row", id)
		}
		seen[id] = true
		refs := testRef.FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(refs) == 0 {
			t.Errorf("docs/threat-model.md row %s names no test (`folder` \"spec text\")", id)
			continue
		}
		checkTestRefs(t, root, sources, "row "+id, refs)
	}
}

// checkTestRefs fails for each reference (a package folder and a test's text, testRef) whose
// folder's test files do not contain the text; sources caches each folder's test sources.
func checkTestRefs(t *testing.T, root string, sources map[string]string, what string, refs [][]string) {
	t.Helper()
	for _, ref := range refs {
		dir, text := ref[1], ref[2]
		if len(text) < minRefText {
			t.Errorf("%s: %q is too short to name one test", what, text)
			continue
		}
		src, ok := sources[dir]
		if !ok {
			src = testSources(t, filepath.Join(root, filepath.FromSlash(dir)))
			sources[dir] = src
		}
		if src == "" {
			t.Errorf("%s: folder %s holds no _test.go file", what, dir)
			continue
		}
		if !strings.Contains(src, text) {
			t.Errorf("%s: no test in %s contains %q", what, dir, text)
		}
	}
}

// attackRows returns the data rows of the table under "## Attack table".
func attackRows(doc string) []string {
	var rows []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Attack table"
		case in && strings.HasPrefix(line, "| T"):
			rows = append(rows, line)
		}
	}
	return rows
}

// testSources concatenates the _test.go files of one folder (not its subfolders).
func testSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String()
}
