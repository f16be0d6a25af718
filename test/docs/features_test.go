package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef names the issue that builds a feature CAPTF does not have yet.
var issueRef = regexp.MustCompile(`\bissue [0-9]+\b`)

// Every row of docs/features.md says Y or N; a Y names tests that exist, an N names its issue.
func TestFeatureTableProvesEveryYes(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(string(b), "## The table")
	if len(rows) < 10 {
		t.Fatalf("found %d rows in the table of docs/features.md; the parser lost them", len(rows))
	}
	sources := map[string]string{}
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if len(cells) != 4 {
			t.Errorf("docs/features.md row %q has %d cells, want 4", row, len(cells))
			continue
		}
		feature, says, how, proof := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), cells[2], cells[3]
		switch says {
		case "Y":
			refs := testRef.FindAllStringSubmatch(proof, -1)
			if len(refs) == 0 {
				t.Errorf("docs/features.md: %q says Y and names no test", feature)
			}
			checkTestRefs(t, root, sources, fmt.Sprintf("%q", feature), refs)
		case "N":
			if !issueRef.MatchString(how) {
				t.Errorf("docs/features.md: %q says N and names no issue", feature)
			}
		default:
			t.Errorf("docs/features.md: %q says %q, want Y or N", feature, says)
		}
	}
}

// tableRows returns the data rows of the first table under heading.
func tableRows(doc, heading string) []string {
	var rows []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| feature ") && !strings.HasPrefix(line, "| ---"):
			rows = append(rows, line)
		}
	}
	return rows
}
