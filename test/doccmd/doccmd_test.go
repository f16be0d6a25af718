package doccmd_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// What a shell runs, from both kinds of block: a sh block's lines (its comment lines are the
// output the page shows) and a plain block's "$ " lines (the rest is output); continuations
// are joined, a trailing comment is kept apart unless it is quoted, and synopsis blocks hold
// no command.
func TestParse(t *testing.T) {
	page := strings.Join([]string{
		"Some prose with `inline code`.",
		"```sh",
		"export A=1   # set it",
		"kubectl get x",
		"# NAME  READY",
		"# x     True",
		"",
		"printf 'a # not a comment' \"$PWD\" > out  # a comment",
		"```",
		"```",
		"kubectl captf status [KIND/NAME] [-o json]",
		"```",
		"```",
		"$ clusterctl generate cluster fl --from t.yaml \\",
		"    --worker-machine-count 2 > fl.yaml",
		"$ kubectl apply -f fl.yaml",
		"cluster/fl created",
		"  $ terraform force-unlock 1   # output, not a command",
		"```",
	}, "\n")
	got := doccmd.Parse("p.md", []byte(page))
	want := []doccmd.Command{
		{Page: "p.md", Line: 3, Text: "export A=1", Comment: "set it"},
		{Page: "p.md", Line: 4, Text: "kubectl get x", Output: []string{"NAME  READY", "x     True"}},
		{Page: "p.md", Line: 8, Text: `printf 'a # not a comment' "$PWD" > out`, Comment: "a comment"},
		{Page: "p.md", Line: 14, Text: "clusterctl generate cluster fl --from t.yaml --worker-machine-count 2 > fl.yaml"},
		{Page: "p.md", Line: 16, Text: "kubectl apply -f fl.yaml", Output: []string{"cluster/fl created", "  $ terraform force-unlock 1   # output, not a command"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed:\n%#v\nwant:\n%#v", got, want)
	}
}

// Every command of the pages has a fate and every fate a command: a command added to a page
// without a spec or a reason, or a fate an edit left behind, fails here. A fate either names a
// spec or says why none runs the command.
func TestEveryCommandOfThePagesHasAFate(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	shown := map[doccmd.Key]bool{}
	for _, page := range doccmd.Pages {
		cmds, err := doccmd.Read(root, page)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) == 0 {
			t.Errorf("%s shows no command: the parser no longer reads it", page)
		}
		for _, c := range cmds {
			shown[c.Key()] = true
			f, ok := doccmd.Fates[c.Key()]
			if !ok {
				t.Errorf("%s:%d: %q has no fate: run it in an e2e spec and add it to doccmd.Fates, or say there why no test can", c.Page, c.Line, c.Text)
				continue
			}
			if (f.Spec == "") == (f.NotRun == "") {
				t.Errorf("%s:%d: %q: a fate names a spec or says why none runs it, not both or neither", c.Page, c.Line, c.Text)
			}
		}
	}
	for k := range doccmd.Fates {
		if !shown[k] {
			t.Errorf("%s no longer shows %q: remove its fate (and its run from the spec)", k.Page, k.Text)
		}
	}
}
