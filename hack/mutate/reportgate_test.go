package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// notKilled are the verdicts of a mutation that a test did not kill (verdictText).
var notKilled = []string{"SURVIVED", "STALE", "INVALID"}

// killedInReport reads docs/mutation-report.md's tables: the names of the mutations that have
// a row whose first cell names them (the first word, backticks dropped) and whose other cells
// carry no verdict of notKilled.
func killedInReport(report string) map[string]bool {
	killed := map[string]bool{}
	for _, line := range strings.Split(report, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		fields := strings.Fields(strings.Trim(cells[0], "`"))
		if len(fields) == 0 || slices.ContainsFunc(cells[1:], func(c string) bool { return slices.Contains(notKilled, c) }) {
			continue
		}
		killed[strings.Trim(fields[0], "`")] = true
	}
	return killed
}

// Issue 30's "every mutation of hack/mutations has run and is killed (the report names none
// unrun)", as a gate: each mutation of the lists has a row in docs/mutation-report.md that a
// test killed it. A new mutation lands with its run in the report.
func TestReportNamesEveryMutationKilled(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := LoadLists(repo, filepath.Join("hack", "mutations", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "docs", "mutation-report.md"))
	if err != nil {
		t.Fatal(err)
	}
	killed := killedInReport(string(raw))
	var missing []string
	for _, m := range ms {
		if !killed[m.Name] {
			missing = append(missing, m.Qualified())
		}
	}
	t.Logf("%d mutations in hack/mutations, %d with a killed row in docs/mutation-report.md", len(ms), len(ms)-len(missing))
	if len(missing) > 0 {
		t.Errorf("%d mutations have no row in docs/mutation-report.md that a test killed them (run them, then add the run's table): %s",
			len(missing), strings.Join(missing, ", "))
	}
}

func TestKilledInReportSkipsRowsThatWereNotKilled(t *testing.T) {
	report := strings.Join([]string{
		"| mutation | killed by | s |",
		"| --- | --- | ---: |",
		"| a-killed | TestA | 3 |",
		"| `b-backticked` (noted) | TestB | 4 |",
		"| c-survived | x.go | SURVIVED | 30 |",
		"| d-stale | STALE | 1 |",
		"text | not a row",
	}, "\n")
	got := killedInReport(report)
	for _, want := range []string{"a-killed", "b-backticked"} {
		if !got[want] {
			t.Errorf("%s: want killed", want)
		}
	}
	for _, not := range []string{"c-survived", "d-stale"} {
		if got[not] {
			t.Errorf("%s: want not killed", not)
		}
	}
}
