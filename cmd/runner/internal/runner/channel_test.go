package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

const testCredential = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

// withChannel points the fixture at a channel folder holding an address and a credential, as
// a serving state channel leaves them. The fake terraform never connects to it.
func withChannel(f *fixture) string {
	dir := filepath.Join(f.t.TempDir(), "channel")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	write(f.t, filepath.Join(dir, runnerapi.ChannelCredentialFile), testCredential)
	write(f.t, filepath.Join(dir, runnerapi.ChannelAddressFile), "http://127.0.0.1:40123")
	f.cfg.ChannelDir = dir
	return dir
}

func channelRecord(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, name), string(b))
}

func TestChannelRunUsesTheHTTPBackendAndNoKubernetesCredential(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	withChannel(f)
	f.env("KUBE_CONFIG_PATH=/kc", "KUBECONFIG=/kc2", "KUBE_TOKEN=t", "TF_HTTP_ADDRESS=http://evil", "TF_HTTP_PASSWORD=guess")
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	url := "http://127.0.0.1:40123/state/team-a/" + testSuffix
	calls := f.calls()
	// Every setting comes from TF_HTTP_* (which terraform never records in .terraform or in a
	// saved plan), none from -backend-config.
	wantInit := []string{"init", "-input=false", "-no-color", "-reconfigure"}
	if !slices.Equal(calls[0].Args, wantInit) {
		t.Fatalf("init %q\nwant %q", calls[0].Args, wantInit)
	}
	for _, c := range calls {
		want := map[string]string{"TF_WORKSPACE": "default", "TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1",
			"TMPDIR": filepath.Join(f.cfg.WorkDir, "tmp"), "TF_HTTP_PASSWORD": testCredential,
			"TF_HTTP_ADDRESS": url, "TF_HTTP_LOCK_ADDRESS": url, "TF_HTTP_UNLOCK_ADDRESS": url, "TF_HTTP_UPDATE_METHOD": "POST",
			"TF_HTTP_LOCK_METHOD": "LOCK", "TF_HTTP_UNLOCK_METHOD": "UNLOCK", "TF_HTTP_USERNAME": "captf"}
		if !mapsEqual(c.Env, want) {
			t.Fatalf("%v ran with %v, want %v", c.Args, c.Env, want)
		}
	}
	b, err := os.ReadFile(filepath.Join(f.cfg.WorkDir, "module", BackendOverrideFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), testCredential) || !strings.Contains(string(b), `"http": {}`) {
		t.Fatalf("override %s", b)
	}
	if strings.Contains(f.out.String(), testCredential) {
		t.Fatalf("the credential was printed:\n%s", f.out)
	}
}

func TestChannelRunRefusesABackendTheModuleMoved(t *testing.T) {
	for _, moved := range []string{"elsewhere", "s3"} {
		t.Run(moved, func(t *testing.T) {
			f := newFixture(t, runnerapi.OperationApply, nil)
			withChannel(f)
			f.env("FAKE_TF_INIT_BACKEND=" + moved)
			res, code := f.run()
			if code != runnerapi.ExitBadInput || res.Outcome != runnerapi.OutcomeFailed {
				t.Fatalf("exit %d result %+v", code, res)
			}
			if got := argsOf(f.calls()); len(got) != 1 {
				t.Fatalf("commands after a moved backend: %q", got)
			}
		})
	}
}

func TestChannelRunWaitsForTheChannelBounded(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	if err := os.Remove(filepath.Join(dir, runnerapi.ChannelAddressFile)); err != nil {
		t.Fatal(err)
	}
	f.cfg.ChannelWait = 200 * time.Millisecond
	res, code := f.run()
	if code != runnerapi.ExitInternal || !strings.Contains(res.Error, "did not write") || len(f.calls()) != 0 {
		t.Fatalf("exit %d result %+v calls %v", code, res, argsOf(f.calls()))
	}

	// The channel appears while the runner waits.
	f = newFixture(t, runnerapi.OperationDrift, nil)
	dir = withChannel(f)
	addr := filepath.Join(dir, runnerapi.ChannelAddressFile)
	if err := os.Rename(addr, addr+".later"); err != nil {
		t.Fatal(err)
	}
	f.cfg.ChannelWait = 20 * time.Second
	done := make(chan int, 1)
	go func() { _, c := f.run(); done <- c }()
	if err := os.Rename(addr+".later", addr); err != nil {
		t.Fatal(err)
	}
	if c := <-done; c != runnerapi.ExitOK {
		t.Fatalf("exit %d\n%s", c, f.out)
	}
}

func TestFencedRunIsReportedFenced(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelFencedFile, runnerapi.Fenced{Request: "POST", RunLeaseHolder: "captf-0123456789abcdef-9"})
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: Failed to save state: HTTP error: 403")
	res, code := f.run()
	if code != runnerapi.ExitFenced || res.Outcome != runnerapi.OutcomeFenced {
		t.Fatalf("exit %d result %+v", code, res)
	}
	if !strings.Contains(res.Error, "captf-0123456789abcdef-9") || !strings.Contains(res.Error, "refused POST") || !strings.Contains(res.Error, "HTTP error: 403") {
		t.Fatalf("error %q", res.Error)
	}
}

func TestFencedRecordDoesNotChangeASuccess(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelFencedFile, runnerapi.Fenced{Request: "LOCK"})
	if res, code := f.run(); code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v", code, res)
	}
}

func TestLockRecordsReachTheResult(t *testing.T) {
	broken := runnerapi.LockBroken{LockID: "0a1b", Who: "runner@old-pod", Pod: "old-pod", Job: "captf-0123456789abcdef-2"}
	holder := runnerapi.LockHolder{ID: "9f8e", Who: "ops@laptop", Operation: "OperationTypeApply", Created: "2026-01-01T00:00:00Z"}

	// A broken lock is reported on success; a holder is not (the lock was taken in the end).
	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelLockBrokenFile, broken)
	channelRecord(t, dir, runnerapi.ChannelLockHolderFile, holder)
	res, code := f.run()
	if code != runnerapi.ExitOK || res.LockBroken == nil || *res.LockBroken != broken || res.LockHolder != nil {
		t.Fatalf("exit %d result %+v", code, res)
	}

	// A failed run names the holder.
	f = newFixture(t, runnerapi.OperationApply, nil)
	dir = withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelLockHolderFile, holder)
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: Error acquiring the state lock")
	res, code = f.run()
	if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed || res.LockHolder == nil || *res.LockHolder != holder {
		t.Fatalf("exit %d result %+v", code, res)
	}
	raw, _ := os.ReadFile(f.cfg.ResultFile)
	if !strings.Contains(string(raw), `"lockHolder":{"id":"9f8e","who":"ops@laptop"`) {
		t.Fatalf("result file %s", raw)
	}
}

// A state write the channel refused (another lineage) fails the run with the refusal's
// message, whether terraform failed afterwards (the module killed it) or finished.
func TestRefusedStateWriteFailsTheRun(t *testing.T) {
	refusal := map[string]string{"expected": "3f2a", "request": "POST", "sent": "9e1b"}

	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelStateRefusedFile, refusal)
	f.env("FAKE_TF_FAIL=apply", "FAKE_TF_STDERR=Error: killed")
	res, code := f.run()
	if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed {
		t.Fatalf("exit %d result %+v", code, res)
	}
	for _, want := range []string{"refused a state write", "lineage 3f2a", "sent lineage 9e1b", "nothing was written", "Error: killed"} {
		if !strings.Contains(res.Error, want) {
			t.Fatalf("error %q lacks %q", res.Error, want)
		}
	}

	f = newFixture(t, runnerapi.OperationApply, nil)
	dir = withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelStateRefusedFile, refusal)
	res, code = f.run()
	if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed || !strings.Contains(res.Error, "sent lineage 9e1b") {
		t.Fatalf("a refused write behind a finished apply: exit %d result %+v", code, res)
	}
}

// A refused read keeps its own message (the state changed since the controller read it).
func TestRefusedStateReadKeepsItsMessage(t *testing.T) {
	f := newFixture(t, runnerapi.OperationApply, nil)
	dir := withChannel(f)
	channelRecord(t, dir, runnerapi.ChannelStateRefusedFile, runnerapi.StateRefused{Expected: "3f2a", Found: "9e1b"})
	f.env("FAKE_TF_FAIL=init", "FAKE_TF_STDERR=Error refreshing state: Unexpected HTTP response code 409")
	res, code := f.run()
	if code != runnerapi.ExitTerraformFailed || res.Outcome != runnerapi.OutcomeFailed {
		t.Fatalf("exit %d result %+v", code, res)
	}
	if !strings.Contains(res.Error, "the state changed since the controller read it (lineage 3f2a; the state Secret now holds lineage 9e1b)") {
		t.Fatalf("error %q", res.Error)
	}
}
