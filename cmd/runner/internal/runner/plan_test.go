package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// change renders one resource_changes (or resource_drift) entry of `show -json`.
func change(address string, actions ...string) string {
	b, _ := json.Marshal(map[string]any{"address": address, "change": map[string]any{"actions": actions}})
	return string(b)
}

func showJSON(changes, drift []string) string {
	return `{"format_version":"1.2","resource_changes":[` + strings.Join(changes, ",") + `],"resource_drift":[` + strings.Join(drift, ",") + `]}`
}

func TestSummarizeCountsActions(t *testing.T) {
	doc := showJSON([]string{
		change("terraform_data.b", "create"),
		change("terraform_data.a", "update"),
		change("terraform_data.r1", "delete", "create"),
		change("terraform_data.r2", "create", "delete"),
		change("terraform_data.gone", "delete"),
		change("terraform_data.same", "no-op"),
		change("data.terraform_remote_state.x", "read"),
		change("terraform_data.forgotten", "forget"),
	}, []string{change("terraform_data.outside", "update")})
	sum, err := Summarize([]byte(doc), false)
	if err != nil {
		t.Fatal(err)
	}
	want := runnerapi.PlanSummary{Create: 1, Update: 1, Replace: 2, Delete: 1, Forget: 1,
		Addresses: []string{"terraform_data.a", "terraform_data.b", "terraform_data.forgotten", "terraform_data.gone", "terraform_data.r1", "terraform_data.r2"}}
	if got := sum.Bounded(runnerapi.MaxRecordAddresses); !summaryEqual(got, want) {
		t.Fatalf("summary %+v\nwant    %+v", got, want)
	}
	// A refresh-only plan lists what changed outside terraform in resource_drift.
	sum, err = Summarize([]byte(doc), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.outside"}}); !summaryEqual(sum, want) {
		t.Fatalf("refresh summary %+v", sum)
	}
	if _, err := Summarize([]byte("not json"), false); err == nil {
		t.Fatal("read garbage")
	}
}

func summaryEqual(a, b runnerapi.PlanSummary) bool {
	return a.Create == b.Create && a.Update == b.Update && a.Replace == b.Replace && a.Delete == b.Delete &&
		a.Truncated == b.Truncated && slices.Equal(a.Addresses, b.Addresses)
}

// manyChanges is n updates, named so that their sorted order is known.
func manyChanges(n int) []string {
	var out []string
	for i := n - 1; i >= 0; i-- {
		out = append(out, change(fmt.Sprintf("terraform_data.r%03d", i), "update"))
	}
	return out
}

func TestDriftResultCarriesABoundedSummary(t *testing.T) {
	f := newFixture(t, runnerapi.OperationDrift, []string{"hunter2-secret"})
	changes := append(manyChanges(25), change(`terraform_data.k["hunter2-secret"]`, "create"))
	f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_SHOW_JSON="+showJSON(changes, nil))
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Drift == nil || !*res.Drift || res.Summary == nil {
		t.Fatalf("exit %d result %+v", code, res)
	}
	s := res.Summary
	if s.Update != 25 || s.Create != 1 || !s.Truncated || len(s.Addresses) != runnerapi.MaxResultAddresses {
		t.Fatalf("summary %+v", s)
	}
	if !slices.IsSorted(s.Addresses) || s.Addresses[1] != "terraform_data.r000" {
		t.Fatalf("addresses not sorted: %q", s.Addresses)
	}
	raw, _ := os.ReadFile(f.cfg.ResultFile)
	if strings.Contains(string(raw), "hunter2-secret") || !strings.Contains(string(raw), `terraform_data.k[\"[REDACTED]\"]`) {
		t.Fatalf("an address leaks a redacted value or was dropped: %s", raw)
	}
	if strings.Contains(f.out.String(), "resource_changes") {
		t.Fatalf("show -json output was printed:\n%s", f.out)
	}
}

// fakePlanEndpoint plays the state channel's plan endpoint for the runner.
type fakePlanEndpoint struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// put and get answer PUT and GET.
	put func(runnerapi.PlanUpload) (int, any)
	get func() (int, any)
	// uploads are the PUT bodies received; gets counts GETs.
	uploads []runnerapi.PlanUpload
	gets    int
}

func newPlanEndpoint(t *testing.T) *fakePlanEndpoint {
	ep := &fakePlanEndpoint{t: t}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != runnerapi.ChannelUsername || p != testCredential {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != runnerapi.PlanPathPrefix+"team-a/"+testSuffix {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		ep.mu.Lock()
		defer ep.mu.Unlock()
		var code int
		var body any
		switch r.Method {
		case http.MethodPut:
			var up runnerapi.PlanUpload
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &up); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ep.uploads = append(ep.uploads, up)
			code, body = ep.put(up)
		case http.MethodGet:
			ep.gets++
			code, body = ep.get()
		}
		w.WriteHeader(code)
		if s, ok := body.(string); ok {
			_, _ = io.WriteString(w, s)
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

// attach points the fixture at a channel folder whose address is the endpoint.
func (ep *fakePlanEndpoint) attach(f *fixture) string {
	dir := withChannel(f)
	write(f.t, filepath.Join(dir, runnerapi.ChannelAddressFile), ep.srv.URL)
	return dir
}

// planRecordOf is a consistent record of file, as the channel writes it.
func planRecordOf(file []byte, serial uint64) runnerapi.PlanRecord {
	sha := runnerapi.FileSHA256(file)
	return runnerapi.PlanRecord{ID: runnerapi.PlanID(sha, "sha256:inputs", serial, "lineage-1"), FileSHA256: sha, InputsHash: "sha256:inputs",
		StateSerial: serial, StateLineage: "lineage-1", Job: "captf-" + testSuffix + "-4"}
}

// testDigests are the artifact digests the fake channel reports for a stored plan.
var testDigests = runnerapi.PlanDigests{File: strings.Repeat("a", 64), Record: strings.Repeat("b", 64), JSON: strings.Repeat("c", 64), Text: strings.Repeat("d", 64)}

// storedOf is the channel's answer to a PUT that stored rec, with testDigests.
func storedOf(rec runnerapi.PlanRecord) runnerapi.PlanStored {
	return runnerapi.PlanStored{PlanRecord: rec, Digests: testDigests}
}

// savedRefOf is the Result's SavedPlan for a stored rec: its reference and the digests the
// channel reported.
func savedRefOf(rec runnerapi.PlanRecord) runnerapi.PlanRef {
	ref := rec.Ref()
	d := testDigests
	ref.Digests = &d
	return ref
}

func TestPlanIsSavedThroughTheChannel(t *testing.T) {
	f := newFixture(t, runnerapi.OperationPlan, []string{"hunter2-secret"})
	ep := newPlanEndpoint(t)
	ep.put = func(up runnerapi.PlanUpload) (int, any) {
		rec := planRecordOf(up.File, 7)
		rec.PlanSummary = up.Summary
		return http.StatusOK, storedOf(rec)
	}
	ep.attach(f)
	text := "Terraform will perform the following actions:\n  password = \"hunter2-secret\"\n" + strings.Repeat("  # a line of the plan\n", 40000)
	textFile := filepath.Join(t.TempDir(), "plan.txt")
	write(t, textFile, text)
	f.env("FAKE_TF_PLAN_EXIT=2", "FAKE_TF_SHOW_JSON="+showJSON(manyChanges(60), nil), "FAKE_TF_SHOW_TEXT_FILE="+textFile)
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if len(ep.uploads) != 1 {
		t.Fatalf("%d uploads", len(ep.uploads))
	}
	up := ep.uploads[0]
	if string(up.File) != fakePlanFile {
		t.Fatalf("uploaded file %q", up.File)
	}
	if up.Summary.Update != 60 || len(up.Summary.Addresses) != runnerapi.MaxRecordAddresses || !up.Summary.Truncated {
		t.Fatalf("uploaded summary: %d updates, %d addresses, truncated %t", up.Summary.Update, len(up.Summary.Addresses), up.Summary.Truncated)
	}
	if len(up.Text) > runnerapi.MaxPlanTextBytes || !strings.HasSuffix(up.Text, runnerapi.PlanTextTruncatedMarker) ||
		!strings.HasPrefix(up.Text, "Terraform will perform") {
		t.Fatalf("text of %d bytes not bounded: ...%q", len(up.Text), up.Text[len(up.Text)-80:])
	}
	if strings.Contains(up.Text, "hunter2-secret") {
		t.Fatal("the plan text carries a redacted value")
	}
	want := savedRefOf(planRecordOf([]byte(fakePlanFile), 7))
	if res.SavedPlan == nil || !reflect.DeepEqual(*res.SavedPlan, want) {
		t.Fatalf("saved plan %+v, want %+v (with the digests the channel reported)", res.SavedPlan, want)
	}
	if res.Summary == nil || len(res.Summary.Addresses) != runnerapi.MaxResultAddresses || res.Changes == nil || !*res.Changes {
		t.Fatalf("result %+v", res)
	}
	for _, c := range f.calls() {
		if c.Args[0] == "show" && len(c.Args) > 1 && c.Args[1] == "-no-color" {
			return
		}
	}
	t.Fatalf("no show of the plan text: %q", argsOf(f.calls()))
}

func TestSavePlanFailures(t *testing.T) {
	cases := []struct {
		name     string
		code     int
		body     string
		fenced   bool
		wantExit int
		wantOut  runnerapi.Outcome
		wantErr  string
	}{
		{"too large", http.StatusRequestEntityTooLarge, "the saved plan does not fit the plan Secret", false, runnerapi.ExitBadInput, runnerapi.OutcomeFailed, "does not fit"},
		{"fenced", http.StatusForbidden, "fenced", true, runnerapi.ExitFenced, runnerapi.OutcomeFenced, "run lease names captf-0123456789abcdef-9"},
		{"forbidden, not fenced", http.StatusForbidden, "only a Plan Job stores a plan", false, runnerapi.ExitInternal, runnerapi.OutcomeFailed, "only a Plan Job"},
		{"missing Secret", http.StatusPreconditionFailed, "read the plan: the plan Secret team-a/captf-plan-x is missing", false, runnerapi.ExitInternal, runnerapi.OutcomeFailed, "missing"},
		// A channel that stored the plan but reported no digests of its artifacts: the manager
		// could not bind them to the plan, so the run fails rather than report a plan it would
		// hold as corrupt.
		{"stored, no digests", http.StatusOK, mustJSON(planRecordOf([]byte(fakePlanFile), 7)), false, runnerapi.ExitInternal, runnerapi.OutcomeFailed, "did not report the digests"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, runnerapi.OperationPlan, nil)
			ep := newPlanEndpoint(t)
			ep.put = func(runnerapi.PlanUpload) (int, any) { return tc.code, tc.body }
			dir := ep.attach(f)
			if tc.fenced {
				channelRecord(t, dir, runnerapi.ChannelFencedFile, runnerapi.Fenced{Request: "PUT /plan", RunLeaseHolder: "captf-0123456789abcdef-9"})
			}
			f.env("FAKE_TF_PLAN_EXIT=2")
			res, code := f.run()
			if code != tc.wantExit || res.Outcome != tc.wantOut || !strings.Contains(res.Error, tc.wantErr) || res.SavedPlan != nil {
				t.Fatalf("exit %d result %+v", code, res)
			}
		})
	}
}

// savedPlanFixture is an Apply of the saved plan file whose endpoint answers GET with get.
func savedPlanFixture(t *testing.T, planID string, get func() (int, any)) (*fixture, *fakePlanEndpoint, string) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	f.cfg.PlanID = planID
	ep := newPlanEndpoint(t)
	ep.get = get
	ep.attach(f)
	applied := filepath.Join(t.TempDir(), "applied")
	f.env("FAKE_TF_APPLIED=" + applied)
	return f, ep, applied
}

func TestApplyOfASavedPlanAppliesExactlyThatFile(t *testing.T) {
	file := []byte("PK\x03\x04 the approved plan")
	rec := planRecordOf(file, 3)
	f, ep, applied := savedPlanFixture(t, rec.ID, func() (int, any) {
		return http.StatusOK, runnerapi.PlanDownload{Record: rec, File: file}
	})
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if res.AppliedPlan == nil || *res.AppliedPlan != rec.Ref() || res.PlanStale || res.PlanRefused != "" {
		t.Fatalf("result %+v", res)
	}
	got, err := os.ReadFile(applied)
	if err != nil || string(got) != string(file) {
		t.Fatalf("applied %q (%v), want the fetched file", got, err)
	}
	var args []string
	for _, a := range argsOf(f.calls()) {
		args = append(args, strings.ReplaceAll(a, f.cfg.WorkDir, "WORK"))
	}
	want := []string{"init -input=false -no-color -reconfigure", "apply -input=false -no-color -lock-timeout=42s WORK/plan.tfplan"}
	if !slices.Equal(args, want) {
		t.Fatalf("commands %q\nwant %q", args, want)
	}
	if ep.gets != 1 {
		t.Fatalf("%d fetches", ep.gets)
	}
	if names := stepNamesOf(res); !slices.Equal(names, []string{"init", "apply"}) {
		t.Fatalf("steps %v", names)
	}
}

func stepNamesOf(r runnerapi.Result) []string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name)
	}
	return out
}

// The runner's own checks of what the channel handed out: the plan of its --plan-id, the file
// its record names, a record whose ID is the hash of its fields. None applies anything.
func TestApplyRefusesAPlanThatIsNotTheApprovedOne(t *testing.T) {
	file := []byte("PK\x03\x04 the approved plan")
	approved := planRecordOf(file, 3)
	other := planRecordOf([]byte("PK\x03\x04 another plan"), 3)
	tampered := approved
	tampered.StateSerial = 4 // the ID no longer covers the record's serial
	cases := map[string]struct {
		dl         runnerapi.PlanDownload
		wantReason string
	}{
		"another plan's ID":                 {runnerapi.PlanDownload{Record: other, File: []byte("PK\x03\x04 another plan")}, runnerapi.PlanRefusedSuperseded},
		"a file that is not the record's":   {runnerapi.PlanDownload{Record: approved, File: []byte("PK\x03\x04 a swapped plan")}, runnerapi.PlanRefusedCorrupt},
		"a record whose ID is not its hash": {runnerapi.PlanDownload{Record: tampered, File: file}, runnerapi.PlanRefusedCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, _, applied := savedPlanFixture(t, approved.ID, func() (int, any) { return http.StatusOK, tc.dl })
			res, code := f.run()
			if code != runnerapi.ExitPlanRefused || res.Outcome != runnerapi.OutcomeFailed || res.PlanRefused != tc.wantReason || res.AppliedPlan != nil {
				t.Fatalf("exit %d result %+v", code, res)
			}
			if _, err := os.Stat(applied); err == nil {
				t.Fatal("a refused plan was applied")
			}
			if got := argsOf(f.calls()); len(got) != 1 {
				t.Fatalf("commands after a refused plan: %q", got)
			}
		})
	}
}

func TestChannelRefusalOfTheSavedPlanIsReported(t *testing.T) {
	for _, reason := range []string{runnerapi.PlanRefusedConsumed, runnerapi.PlanRefusedSuperseded, runnerapi.PlanRefusedCorrupt} {
		t.Run(reason, func(t *testing.T) {
			code := http.StatusConflict
			if reason == runnerapi.PlanRefusedCorrupt {
				code = http.StatusUnprocessableEntity
			}
			f, _, applied := savedPlanFixture(t, runnerapi.PlanID("a", "b", 1, "c"), func() (int, any) {
				return code, runnerapi.PlanRefusal{Reason: reason, Message: "plan x was already handed to Job y"}
			})
			res, exit := f.run()
			if exit != runnerapi.ExitPlanRefused || res.PlanRefused != reason || !strings.Contains(res.Error, "handed to Job y") {
				t.Fatalf("exit %d result %+v", exit, res)
			}
			if _, err := os.Stat(applied); err == nil {
				t.Fatal("a refused plan was applied")
			}
		})
	}
	// A fenced fetch is Fenced.
	f, _, _ := savedPlanFixture(t, runnerapi.PlanID("a", "b", 1, "c"), func() (int, any) { return http.StatusForbidden, "fenced" })
	channelRecord(t, f.cfg.ChannelDir, runnerapi.ChannelFencedFile, runnerapi.Fenced{Request: "GET /plan", RunLeaseHolder: "captf-0123456789abcdef-9"})
	if res, code := f.run(); code != runnerapi.ExitFenced || res.Outcome != runnerapi.OutcomeFenced {
		t.Fatalf("fenced fetch: exit %d result %+v", code, res)
	}
}

func TestStaleSavedPlanIsReportedStale(t *testing.T) {
	file := []byte("PK\x03\x04 the approved plan")
	rec := planRecordOf(file, 3)
	get := func() (int, any) { return http.StatusOK, runnerapi.PlanDownload{Record: rec, File: file} }
	for _, msg := range []string{"Saved plan is stale", "Saved plan does not match the given state"} {
		f, _, _ := savedPlanFixture(t, rec.ID, get)
		f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=\nError: "+msg+"\n\nThe given plan file can no longer be applied because the state was changed\n")
		res, code := f.run()
		if code != runnerapi.ExitPlanRefused || res.Outcome != runnerapi.OutcomeFailed || !res.PlanStale || res.AppliedPlan != nil {
			t.Fatalf("%s: exit %d result %+v", msg, code, res)
		}
		if !strings.Contains(res.Error, "stale") || !strings.Contains(res.Error, rec.ID) {
			t.Fatalf("error %q", res.Error)
		}
	}
	// Any other failure of the apply is a failed apply of that plan, not a stale one.
	f, _, _ := savedPlanFixture(t, rec.ID, get)
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: creating instance: quota exceeded")
	res, code := f.run()
	if code != runnerapi.ExitTerraformFailed || res.PlanStale || res.AppliedPlan == nil || *res.AppliedPlan != rec.Ref() {
		t.Fatalf("failed apply: exit %d result %+v", code, res)
	}
}

func TestPlanIDNeedsAnApplyThroughTheChannel(t *testing.T) {
	id := runnerapi.PlanID("a", "b", 1, "c")
	for name, mutate := range map[string]func(*fixture){
		"a plan":                func(f *fixture) { f.cfg.Operation = runnerapi.OperationPlan; withChannel(f) },
		"a drift check":         func(f *fixture) { f.cfg.Operation = runnerapi.OperationDrift; withChannel(f) },
		"a restore":             func(f *fixture) { f.cfg.Operation = runnerapi.OperationRestore; withChannel(f) },
		"a destroy, no channel": func(f *fixture) { f.cfg.Operation = runnerapi.OperationDestroy },
		"a destroy plan of an apply": func(f *fixture) {
			f.cfg.PlanID, f.cfg.DestroyPlan = "", true
			withChannel(f)
		},
		"a refresh-only destroy plan": func(f *fixture) {
			f.cfg.Operation, f.cfg.PlanID, f.cfg.RefreshOnly, f.cfg.DestroyPlan = runnerapi.OperationPlan, "", true, true
			withChannel(f)
		},
		"no channel":            func(*fixture) {},
		"a refresh, no channel": func(f *fixture) { f.cfg.Operation = runnerapi.OperationRefresh },
		"not a planID":          func(f *fixture) { f.cfg.PlanID = "ABC"; withChannel(f) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, runnerapi.OperationApply, nil)
			f.cfg.PlanID = id
			mutate(f)
			res, code := f.run()
			if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed || len(f.calls()) != 0 {
				t.Fatalf("exit %d result %+v calls %q", code, res, argsOf(f.calls()))
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
