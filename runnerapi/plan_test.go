package runnerapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func TestPlanIDCoversFileInputsAndState(t *testing.T) {
	id := runnerapi.PlanID("sha-a", "sha256:in", 4, "lineage")
	if !runnerapi.ValidPlanID(id) || id != runnerapi.PlanID("sha-a", "sha256:in", 4, "lineage") {
		t.Fatalf("%q is not a stable plan ID", id)
	}
	for name, other := range map[string]string{
		"file":    runnerapi.PlanID("sha-b", "sha256:in", 4, "lineage"),
		"inputs":  runnerapi.PlanID("sha-a", "sha256:in2", 4, "lineage"),
		"serial":  runnerapi.PlanID("sha-a", "sha256:in", 5, "lineage"),
		"lineage": runnerapi.PlanID("sha-a", "sha256:in", 4, "lineage2"),
		// The parts are separated: moving a character from one part to the next changes the ID.
		"boundary between file and inputs": runnerapi.PlanID("sha-as", "ha256:in", 4, "lineage"),
	} {
		if other == id {
			t.Errorf("changing the %s keeps the ID", name)
		}
	}
	for _, bad := range []string{"", id[:31], id + "0", strings.ToUpper(id), "g" + id[1:]} {
		if runnerapi.ValidPlanID(bad) {
			t.Errorf("%q is valid", bad)
		}
	}
}

func TestActionOf(t *testing.T) {
	cases := map[string][]string{
		runnerapi.ActionCreate: {"create"}, runnerapi.ActionUpdate: {"update"}, runnerapi.ActionDelete: {"delete"},
		runnerapi.ActionReplace: {"delete", "create"}, runnerapi.ActionForget: {"forget"},
	}
	for want, actions := range cases {
		if got := runnerapi.ActionOf(actions); got != want {
			t.Errorf("%v: %q", actions, got)
		}
	}
	if got := runnerapi.ActionOf([]string{"create", "delete"}); got != runnerapi.ActionReplace {
		t.Errorf("create-then-delete: %q", got)
	}
	for _, actions := range [][]string{{"no-op"}, {"read"}, nil, {"create", "update"}} {
		if got := runnerapi.ActionOf(actions); got != "" {
			t.Errorf("%v counted as %q", actions, got)
		}
	}
}

func TestSummaryBounded(t *testing.T) {
	var s runnerapi.PlanSummary
	long := "module.m.terraform_data.x[\"" + strings.Repeat("é", 200) + "\"]"
	for i := 29; i >= 0; i-- {
		s.Add(fmt.Sprintf("terraform_data.r%02d", i), []string{"update"})
	}
	s.Add("terraform_data.r05", []string{"delete", "create"}) // a deposed object's second entry
	s.Add(long, []string{"create"})
	s.Add("terraform_data.same", []string{"no-op"})
	b := s.Bounded(20)
	if b.Update != 30 || b.Replace != 1 || b.Create != 1 || !b.Truncated || len(b.Addresses) != 20 {
		t.Fatalf("%+v", b)
	}
	if !slices.IsSorted(b.Addresses) || !strings.HasPrefix(b.Addresses[0], "module.m.") || b.Addresses[1] != "terraform_data.r00" {
		t.Fatalf("not sorted: %q", b.Addresses)
	}
	if a := b.Addresses[0]; len(a) > runnerapi.MaxAddressBytes || !strings.HasSuffix(a, "...") || !utf8.ValidString(a) {
		t.Fatalf("long address %d bytes: %q", len(a), a)
	}
	all := s.Bounded(100)
	if all.Truncated || len(all.Addresses) != 31 {
		t.Fatalf("duplicates kept or addresses lost: %d, truncated %t", len(all.Addresses), all.Truncated)
	}
	if len(s.Addresses) != 32 || s.Addresses[0] != "terraform_data.r29" {
		t.Fatal("Bounded changed its receiver")
	}
	if e := (runnerapi.PlanSummary{}).Bounded(20); e.Addresses != nil || e.Truncated {
		t.Fatalf("%+v", e)
	}
}

// The result carries at most 20 addresses and always fits 4096 bytes: with addresses of the
// longest kind the counts, the plan references and the outcome survive and the addresses go.
func TestEncodeBoundsThePlanSummary(t *testing.T) {
	ref := &runnerapi.PlanRef{ID: runnerapi.PlanID("f", "i", 1, "l"), FileSHA256: strings.Repeat("a", 64)}
	var s runnerapi.PlanSummary
	for i := range 60 {
		s.Add(fmt.Sprintf("module.very_long_module_name.terraform_data.resource_%02d[%q]", i, strings.Repeat("k", 300)), []string{"update"})
	}
	r := runnerapi.Result{Operation: "Plan", Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{{Name: "init"}, {Name: "plan", ExitCode: 2}},
		Changes: ptrTo(true), Summary: &s, SavedPlan: ref}
	b := runnerapi.Encode(r)
	if len(b) > runnerapi.MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := runnerapi.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Summary == nil || got.Summary.Update != 60 || !got.Summary.Truncated || len(got.Summary.Addresses) == 0 ||
		len(got.Summary.Addresses) >= runnerapi.MaxResultAddresses || got.SavedPlan == nil || *got.SavedPlan != *ref || len(got.Steps) != 2 {
		t.Fatalf("%s", b)
	}
	if len(s.Addresses) != 60 {
		t.Fatal("Encode changed its argument")
	}
	// Short addresses: all 20 fit.
	var short runnerapi.PlanSummary
	for i := range 25 {
		short.Add(fmt.Sprintf("terraform_data.r%02d", i), []string{"create"})
	}
	r.Summary = &short
	got, err = runnerapi.ParseResult(runnerapi.Encode(r))
	if err != nil || len(got.Summary.Addresses) != runnerapi.MaxResultAddresses || !got.Summary.Truncated || got.Summary.Addresses[19] != "terraform_data.r19" {
		t.Fatalf("%+v %v", got.Summary, err)
	}
	// The apply fields round-trip.
	a := runnerapi.Result{Operation: "Apply", Outcome: runnerapi.OutcomeFailed, Steps: []runnerapi.Step{}, PlanStale: true, AppliedPlan: ref,
		PlanRefused: runnerapi.PlanRefusedConsumed, Error: strings.Repeat("Error: Saved plan is stale\n", 300)}
	b = runnerapi.Encode(a)
	got, err = runnerapi.ParseResult(b)
	if err != nil || len(b) > runnerapi.MaxResultBytes || !got.PlanStale || got.AppliedPlan == nil || got.PlanRefused != runnerapi.PlanRefusedConsumed {
		t.Fatalf("%s %v", b, err)
	}
}

func TestCutPlanText(t *testing.T) {
	text := strings.Repeat("  # terraform_data.x will be updated in-place\n", 100)
	if got := runnerapi.CutPlanText(text, len(text)); got != text {
		t.Fatal("a text that fits was cut")
	}
	got := runnerapi.CutPlanText(text, 1000)
	body := strings.TrimSuffix(got, runnerapi.PlanTextTruncatedMarker)
	if len(got) > 1000 || body == got || !strings.HasPrefix(text, body) || !strings.HasSuffix(body, "in-place") {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if got := runnerapi.CutPlanText(strings.Repeat("日本", 1000), 500); !utf8.ValidString(got) || len(got) > 500 {
		t.Fatalf("%d bytes, valid %t", len(got), utf8.ValidString(got))
	}
}

func TestPlanFlagsOnTheCommandLines(t *testing.T) {
	id := runnerapi.PlanID("f", "i", 1, "l")
	got := runnerapi.Command("/r", runnerapi.Invocation{Operation: "Apply", ModuleDir: "/m", InputsDir: "/i", WorkDir: "/w", ResultFile: "/res",
		LockTimeout: time.Minute, ChannelDir: "/c", PlanID: id})
	if got[len(got)-1] != "--plan-id="+id {
		t.Fatalf("%q", got)
	}
	ch := runnerapi.ChannelCommand("/r", runnerapi.ChannelInvocation{Dir: "/c", Namespace: "ns", Suffix: "s", Job: "j", RunLease: "l",
		OwnerKind: "k", OwnerName: "n", OwnerUID: "u", TokenFile: "/t", CAFile: "/ca", Operation: "Apply", InputsHash: "sha256:x", PlanID: id})
	if !slices.Equal(ch[len(ch)-3:], []string{"--operation=Apply", "--inputs-hash=sha256:x", "--plan-id=" + id}) {
		t.Fatalf("%q", ch)
	}
}

func ptrTo[T any](v T) *T { return &v }
