package runnerapi_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// storedPlan is a plan Secret's data as the channel stores it.
func storedPlan() map[string][]byte {
	return map[string][]byte{
		runnerapi.PlanFileKey:   []byte("\x1f\x8bgzip'd plan file"),
		runnerapi.PlanRecordKey: []byte(`{"id":"0123456789abcdef0123456789abcdef","delete":1}`),
		runnerapi.PlanJSONKey:   []byte(`{"resource_changes":[{"address":"aws_db_instance.main","change":{"actions":["delete"]}}]}`),
		runnerapi.PlanTextKey:   []byte("  # aws_db_instance.main will be destroyed\n"),
	}
}

// TestPlanDigestsVerifyEachArtifact rewrites each artifact in turn (and removes it, and adds
// nothing but keys beside them): Verify names exactly the rewritten ones.
func TestPlanDigestsVerifyEachArtifact(t *testing.T) {
	d := runnerapi.DigestPlanArtifacts(storedPlan())
	if !d.Complete() {
		t.Fatalf("digests of a stored plan are not complete: %+v", d)
	}
	if err := d.Verify(storedPlan()); err != nil {
		t.Fatalf("the untouched plan: %v", err)
	}
	extra := storedPlan()
	extra["other"] = []byte("a key beside the artifacts binds nothing")
	if err := d.Verify(extra); err != nil {
		t.Fatalf("a key beside the artifacts: %v", err)
	}
	type tamper struct {
		name string
		do   func(map[string][]byte)
		want []string
	}
	var cases []tamper
	for _, k := range runnerapi.PlanArtifactKeys {
		cases = append(cases,
			tamper{"rewritten " + k, func(m map[string][]byte) { m[k] = append(slices.Clone(m[k]), ' ') }, []string{k}},
			tamper{"removed " + k, func(m map[string][]byte) { delete(m, k) }, []string{k}},
			tamper{"emptied " + k, func(m map[string][]byte) { m[k] = nil }, []string{k}})
	}
	cases = append(cases, tamper{"summary.json and plan.json rewritten together", func(m map[string][]byte) {
		m[runnerapi.PlanRecordKey] = []byte(`{"id":"0123456789abcdef0123456789abcdef","update":1}`)
		m[runnerapi.PlanJSONKey] = []byte(`{"resource_changes":[]}`)
	}, []string{runnerapi.PlanRecordKey, runnerapi.PlanJSONKey}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := storedPlan()
			tc.do(m)
			err := d.Verify(m)
			var mm *runnerapi.PlanArtifactMismatch
			if !errors.As(err, &mm) || !slices.Equal(mm.Keys, tc.want) {
				t.Fatalf("Verify = %v, want a mismatch of %v", err, tc.want)
			}
			for _, k := range tc.want {
				if !strings.Contains(err.Error(), k) {
					t.Fatalf("the message %q does not name %s", err, k)
				}
			}
		})
	}
}

// TestPlanDigestsIncompleteVerifyNothing: digests that are missing or malformed bind nothing,
// so they match no artifact.
func TestPlanDigestsIncompleteVerifyNothing(t *testing.T) {
	good := runnerapi.DigestPlanArtifacts(storedPlan())
	for name, d := range map[string]runnerapi.PlanDigests{
		"none":         {},
		"no text":      {File: good.File, Record: good.Record, JSON: good.JSON},
		"upper case":   {File: strings.ToUpper(good.File), Record: good.Record, JSON: good.JSON, Text: good.Text},
		"cut short":    {File: good.File[:10], Record: good.Record, JSON: good.JSON, Text: good.Text},
		"not hex":      {File: strings.Repeat("g", 64), Record: good.Record, JSON: good.JSON, Text: good.Text},
		"of the empty": runnerapi.DigestPlanArtifacts(nil),
	} {
		t.Run(name, func(t *testing.T) {
			if name != "of the empty" && d.Complete() {
				t.Fatalf("%+v is complete", d)
			}
			if err := d.Verify(storedPlan()); err == nil {
				t.Fatalf("%+v verified a plan it does not bind", d)
			}
		})
	}
	if !slices.Equal(slices.Sorted(slices.Values(runnerapi.PlanArtifactKeys)),
		slices.Sorted(maps.Keys(storedPlan()))) {
		t.Fatalf("PlanArtifactKeys %v are not the plan Secret's keys", runnerapi.PlanArtifactKeys)
	}
}

// TestEncodeKeepsTheSavedPlanDigests: a Result cut to fit the termination log keeps the saved
// plan's digests whole (the manager binds the plan Secret with them).
func TestEncodeKeepsTheSavedPlanDigests(t *testing.T) {
	d := runnerapi.DigestPlanArtifacts(storedPlan())
	sum := runnerapi.PlanSummary{Delete: 30}
	for i := range 30 {
		sum.Addresses = append(sum.Addresses, strings.Repeat("module.long.", 20)+string(rune('a'+i%26)))
	}
	r := runnerapi.Result{Operation: runnerapi.OperationPlan, Outcome: runnerapi.OutcomeSucceeded, Summary: &sum,
		SavedPlan: &runnerapi.PlanRef{ID: "0123456789abcdef0123456789abcdef", FileSHA256: d.File, Digests: &d}, Error: strings.Repeat("x", 10000)}
	b := runnerapi.Encode(r)
	if len(b) > runnerapi.MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	back, err := runnerapi.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.SavedPlan == nil || back.SavedPlan.Digests == nil || *back.SavedPlan.Digests != d {
		t.Fatalf("saved plan %+v, want the digests %+v", back.SavedPlan, d)
	}
}
