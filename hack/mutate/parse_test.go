package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseListReadsNamesEscapesAndComments(t *testing.T) {
	list := strings.Join([]string{
		"# A comment about the area.",
		"",
		"# name: first-rule",
		"a/b.go|if x {\\n\\treturn\\n}|if false {|go test ./a/ -run TestX -count=1",
		"   # an indented comment",
		"c.go| keep spaces |x\\\\n|go test ./ -count=1 -ginkgo.focus \"a spec\"",
		"# name: third",
		"d.yaml|a: 1|a: 2|make something",
		"# name: pipes",
		"e.go|a \\|\\| b|a|go test ./ -run '^TestA$\\|^TestB$' -count=1",
	}, "\n")
	ms, err := ParseList("area", strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("got %d mutations, want 4: %+v", len(ms), ms)
	}
	want := []Mutation{
		{Name: "first-rule", List: "area", Line: 4, File: "a/b.go", Old: "if x {\n\treturn\n}", New: "if false {", Command: "go test ./a/ -run TestX -count=1"},
		{Name: "area:6", List: "area", Line: 6, File: "c.go", Old: " keep spaces ", New: `x\n`, Command: `go test ./ -count=1 -ginkgo.focus "a spec"`},
		{Name: "third", List: "area", Line: 8, File: "d.yaml", Old: "a: 1", New: "a: 2", Command: "make something"},
		{Name: "pipes", List: "area", Line: 10, File: "e.go", Old: "a || b", New: "a", Command: "go test ./ -run '^TestA$|^TestB$' -count=1"},
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mutation %d:\n got %+v\nwant %+v", i, ms[i], want[i])
		}
	}
	if q := ms[0].Qualified(); q != "area/first-rule" {
		t.Errorf("Qualified = %q", q)
	}
}

func TestParseListRejectsWhatCannotProveAnything(t *testing.T) {
	cases := map[string]string{
		"three fields":             "a.go|x|go test ./ -count=1",
		"five fields":              "a.go|x|y|z|go test ./ -count=1",
		"absolute file":            "/etc/passwd|x|y|true",
		"file outside the repo":    "../x.go|x|y|true",
		"empty old text":           "a.go||y|true",
		"no change":                "a.go|x|x|true",
		"no command":               "a.go|x|y| ",
		"cached go test":           "a.go|x|y|go test ./a/ -run TestX",
		"name naming nothing":      "# name: lonely",
		"two names in a row":       "# name: one\n# name: two\na.go|x|y|true",
		"a name with spaces":       "# name: two words\na.go|x|y|true",
		"a malformed name comment": "# name:\na.go|x|y|true",
	}
	for name, list := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseList("l", strings.NewReader(list)); err == nil {
				t.Fatalf("accepted %q", list)
			}
		})
	}
	if _, err := ParseList("l", strings.NewReader("a.go|x|y|go test ./a/ -count=1 && go test ./b/ -count 1")); err != nil {
		t.Fatalf("refused a valid line: %v", err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\nb`:         "a\nb",
		`\tx`:          "\tx",
		`a\\nb`:        `a\nb`,
		`a \|\| b`:     "a || b",
		`regexp \d+\.`: `regexp \d+\.`,
		`trailing\`:    `trailing\`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadListsRefusesADuplicateNameAcrossLists(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "# name: same\na.go|x|y|true\n")
	write("b.txt", "# name: same\nb.go|x|y|true\n# name: other\nb.go|p|q|true\n")
	ms, err := LoadLists(dir, "*.txt")
	if err == nil || !strings.Contains(err.Error(), `name "same" is already used at a.txt:2`) {
		t.Fatalf("err = %v", err)
	}
	if len(ms) != 2 {
		t.Fatalf("kept %d mutations, want the 2 with unique names", len(ms))
	}
	if _, err := LoadLists(dir, "none-*.txt"); err == nil {
		t.Fatal("no list matched and no error")
	}
}

func TestSelectByNameOrListGlob(t *testing.T) {
	all := []Mutation{{Name: "decide-lag", List: "decide"}, {Name: "decide-pods", List: "decide"}, {Name: "lease-floor", List: "leases"}}
	names := func(ms []Mutation) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	for patterns, want := range map[string][]string{
		"":                         {"decide-lag", "decide-pods", "lease-floor"},
		"leases/*":                 {"lease-floor"},
		"decide-lag":               {"decide-lag"},
		"*-pods, lease-*":          {"decide-pods", "lease-floor"},
		"decide/*,decide-lag":      {"decide-lag", "decide-pods"},
		"decide/decide-p*":         {"decide-pods"},
		" decide-lag , ,leases/* ": {"decide-lag", "lease-floor"},
	} {
		got, err := Select(all, patterns)
		if err != nil {
			t.Fatalf("Select(%q): %v", patterns, err)
		}
		if !slices.Equal(names(got), want) {
			t.Errorf("Select(%q) = %v, want %v", patterns, names(got), want)
		}
	}
	if _, err := Select(all, "decide-lag,typo"); err == nil {
		t.Error("a pattern that matches nothing was accepted")
	}
	if _, err := Select(all, "[bad"); err == nil {
		t.Error("a malformed pattern was accepted")
	}
}
