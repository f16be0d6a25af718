package main

import (
	"fmt"
	"strings"
	"time"
)

// maxKillers is how many failing tests a table cell names.
const maxKillers = 4

// verdictText is the "killed by" cell: the failing tests of a killed mutation, else the status
// and why.
func verdictText(r Result) string {
	if r.Status == Killed {
		ks := r.Killers
		more := ""
		if len(ks) > maxKillers {
			more = fmt.Sprintf("; and %d more", len(ks)-maxKillers)
			ks = ks[:maxKillers]
		}
		return strings.Join(ks, "; ") + more
	}
	s := string(r.Status)
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	if len(r.Killers) > 0 {
		s += " (" + strings.Join(r.Killers, "; ") + ")"
	}
	return s
}

// cell escapes a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// Table is the results as a Markdown table: name, file, killed by (or the status), seconds.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| mutation | file | killed by | s |\n| --- | --- | --- | ---: |\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", cell(r.M.Name), cell(r.M.File), cell(verdictText(r)), int(r.Took.Round(time.Second).Seconds()))
	}
	return b.String()
}

// Tally counts results by status.
type Tally struct {
	Total, Killed int
	ByStatus      map[Status]int
	Took          time.Duration
}

// Totals counts the results.
func Totals(rs []Result) Tally {
	t := Tally{Total: len(rs), ByStatus: map[Status]int{}}
	for _, r := range rs {
		t.ByStatus[r.Status]++
	}
	t.Killed = t.ByStatus[Killed]
	return t
}

func (t Tally) String() string {
	parts := []string{fmt.Sprintf("%d killed", t.Killed)}
	for _, s := range []Status{Survived, Stale, Invalid, Unproven, Timeout, Baseline, NotRun} {
		if n := t.ByStatus[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(string(s))))
		}
	}
	return fmt.Sprintf("%d mutation(s): %s; %s in all", t.Total, strings.Join(parts, ", "), t.Took.Round(time.Second))
}

// Report is the Markdown record of a run (the -report file).
type Report struct {
	When     time.Time
	Commit   string
	From     Source
	Command  string
	Only     string
	Baseline bool
	Machine  string
	Results  []Result
	Totals   Tally
	// Unselected are the mutations of the lists that this run left out (-only).
	Unselected []Mutation
}

// Markdown renders the report.
func (r Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Mutation report\n\n")
	b.WriteString("Written by `hack/mutate` (`make mutate MUTATE_REPORT=docs/mutation-report.md`); rerun it rather than editing\n")
	b.WriteString("this page. Each mutation is a small rewrite of one safety rule, listed in `hack/mutations/*.txt`,\n")
	b.WriteString("applied alone to a scratch copy of the commit below; the test it names must fail.\n\n")
	fmt.Fprintf(&b, "- date: %s\n", r.When.UTC().Format("2006-01-02 15:04 MST"))
	src := "the commit (git archive)"
	if r.From == FromWorktree {
		src = "the working tree on top of it (uncommitted changes included)"
	}
	fmt.Fprintf(&b, "- commit: `%s`, copied from %s\n", r.Commit, src)
	fmt.Fprintf(&b, "- command: `%s`", r.Command)
	if r.Only != "" {
		fmt.Fprintf(&b, " (selection: `%s`)", r.Only)
	}
	b.WriteString("\n")
	if r.Baseline {
		b.WriteString("- baseline: every distinct test command passed once without a mutation before the run, unless marked BASELINE\n")
	} else {
		b.WriteString("- baseline: not run (-baseline=false)\n")
	}
	fmt.Fprintf(&b, "- machine: %s, shared with other work while it ran; seconds are the wall time of each test command, its compilation included\n", r.Machine)
	fmt.Fprintf(&b, "- totals: %s\n\n", r.Totals.String())
	b.WriteString("## Results\n\n")
	b.WriteString(Table(r.Results))
	b.WriteString("\n")
	if len(r.Unselected) > 0 {
		b.WriteString("## Not run in this report\n\n")
		fmt.Fprintf(&b, "%d mutation(s) of the lists were not selected; run them with\n", len(r.Unselected))
		names := make([]string, len(r.Unselected))
		for i, m := range r.Unselected {
			names[i] = m.Name
		}
		fmt.Fprintf(&b, "`make mutate MUTATIONS='%s'` (or all of them with `make mutate`):\n\n", strings.Join(names, ","))
		b.WriteString("| mutation | list | file | test command |\n| --- | --- | --- | --- |\n")
		for _, m := range r.Unselected {
			fmt.Fprintf(&b, "| %s | %s.txt:%d | %s | `%s` |\n", cell(m.Name), m.List, m.Line, cell(m.File), cell(m.Command))
		}
		b.WriteString("\n")
	}
	b.WriteString(howToAdd)
	return b.String()
}

// howToAdd closes the report.
const howToAdd = `## How to add a mutation

1. Pick the safety rule and the narrowest test that must catch its removal.
2. Add two lines to the list of its area in ` + "`hack/mutations/`" + ` (one file per area; a new
   ` + "`<area>.txt`" + ` is picked up by itself):

   ` + "```" + `
   # name: <area>-<what-the-mutation-breaks>
   path/to/file.go|old text|new text|go test ./path/to/pkg/ -run '^TestName$' -count=1
   ` + "```" + `

   The old text must occur exactly once in the file; ` + "`\\n`" + ` and ` + "`\\t`" + ` in old and new text are a
   newline and a tab, ` + "`\\\\`" + ` a backslash; a literal ` + "`|`" + ` in any field is written ` + "`\\|`" + `
   (Go's ` + "`||`" + ` is ` + "`\\|\\|`" + `). A Ginkgo spec is focused with
   ` + "`go test ./pkg/ -run TestSuite -count=1 -ginkgo.focus 'words of the spec'`" + `. A ` + "`go test`" + ` command
   needs ` + "`-count=1`" + `.
3. Check it: ` + "`go run ./hack/mutate -list -only <name>`" + ` says whether it applies, and
   ` + "`make mutate MUTATIONS=<name>`" + ` runs it (the test command first without the mutation, then
   with it) and must print KILLED with the test's name.
4. A SURVIVED mutation is a missing test: add the test, not an easier mutation.
`
