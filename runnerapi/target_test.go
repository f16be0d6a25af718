package runnerapi_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func TestParseTarget(t *testing.T) {
	good := []struct {
		in   string
		want runnerapi.Target
	}{
		{"replace aws_instance.web", runnerapi.Target{Op: "replace", Address: "aws_instance.web"}},
		{"  replace   aws_instance.web[3] ", runnerapi.Target{Op: "replace", Address: "aws_instance.web[3]"}},
		{`replace module.net["eu"].aws_subnet.a["x-1"]`, runnerapi.Target{Op: "replace", Address: `module.net["eu"].aws_subnet.a["x-1"]`}},
		{"import aws_instance.web i-0abc", runnerapi.Target{Op: "import", Address: "aws_instance.web", ID: "i-0abc"}},
		{"import azurerm_rg.x /subscriptions/1/resourceGroups/my group", runnerapi.Target{Op: "import", Address: "azurerm_rg.x", ID: "/subscriptions/1/resourceGroups/my group"}},
		{"forget aws_instance.web", runnerapi.Target{Op: "forget", Address: "aws_instance.web"}},
		{" forget  module.net.module.a.aws_subnet.b ", runnerapi.Target{Op: "forget", Address: "module.net.module.a.aws_subnet.b"}},
	}
	for _, c := range good {
		got, err := runnerapi.ParseTarget(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if again, err := runnerapi.ParseTarget(got.String()); err != nil || again != got {
			t.Errorf("%q: the canonical form %q reads back as %+v, %v", c.in, got.String(), again, err)
		}
	}
	bad := []struct{ in, want string }{
		{"", "empty"},
		{"replace", `want "replace <address>"`},
		{"replace a.b c.d", `want "replace <address>"`},
		{"import a.b", `want "import <address> <id>"`},
		{"remove a.b", `unknown operation "remove": want "replace <address>", "import <address> <id>" or "forget <address>"`},
		{"forget", `want "forget <address>"`},
		{"forget a.b c.d", `want "forget <address>"`},
		{"forget a.b[0]", "names a resource instance: forget takes the resource's address without instance keys"},
		{`forget module.net["eu"].a.b`, "names a resource instance"},
		{"forget data.aws_ami.x", "not a managed resource instance address"},
		{"forget web", "not a managed resource instance address"},
		{"replace data.aws_ami.x", "not a managed resource instance address"},
		{"replace web", "not a managed resource instance address"},
		{`replace a.b["x"y"]`, "not a managed resource instance address"},
		{"replace a.b[-1]", "not a managed resource instance address"},
		{"import a.b " + strings.Repeat("x", runnerapi.MaxTargetIDBytes+1), "at most 1024"},
		{"import a.b x\ty", "control character"},
	}
	for _, c := range bad {
		if _, err := runnerapi.ParseTarget(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTarget(%q) = %v; want an error containing %q", c.in, err, c.want)
		}
	}
}

func TestTargetPlanArgsAndBlockFile(t *testing.T) {
	r := runnerapi.Target{Op: runnerapi.TargetReplace, Address: "a.b[0]"}
	if got := r.PlanArgs(); !slices.Equal(got, []string{"-replace=a.b[0]"}) {
		t.Errorf("replace args: %v", got)
	}
	if f, err := r.BlockFile(); f != nil || err != nil {
		t.Errorf("a replace writes no block file: %q, %v", f, err)
	}
	im := runnerapi.Target{Op: runnerapi.TargetImport, Address: "a.b", ID: `x-${var.secret}-%{if true}"q"`}
	if got := im.PlanArgs(); got != nil {
		t.Errorf("import args: %v", got)
	}
	raw, err := im.BlockFile()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Import []map[string]string `json:"import"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the import file is not JSON: %v\n%s", err, raw)
	}
	// Terraform's JSON syntax reads "id" as a template: the escapes keep the ID literal.
	want := map[string]string{"to": "a.b", "id": `x-$${var.secret}-%%{if true}"q"`}
	if len(doc.Import) != 1 || doc.Import[0]["to"] != want["to"] || doc.Import[0]["id"] != want["id"] {
		t.Errorf("import block %v, want %v", doc.Import, want)
	}

	fg := runnerapi.Target{Op: runnerapi.TargetForget, Address: "module.net.a.b"}
	if got := fg.PlanArgs(); got != nil {
		t.Errorf("forget args: %v", got)
	}
	raw, err = fg.BlockFile()
	if err != nil {
		t.Fatal(err)
	}
	var removed struct {
		Removed []struct {
			From      string          `json:"from"`
			Lifecycle map[string]bool `json:"lifecycle"`
		} `json:"removed"`
	}
	if err := json.Unmarshal(raw, &removed); err != nil {
		t.Fatalf("the forget file is not JSON: %v\n%s", err, raw)
	}
	if len(removed.Removed) != 1 || removed.Removed[0].From != "module.net.a.b" || len(removed.Removed[0].Lifecycle) != 1 ||
		removed.Removed[0].Lifecycle["destroy"] || !strings.Contains(string(raw), `"destroy": false`) {
		t.Errorf("removed block %s: want one block from module.net.a.b that keeps the objects (destroy = false)", raw)
	}
}
