package runner

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/cmd/runner/internal/channel"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// fakeStateEndpoint plays the state channel's state address for a restore onto no state.
type fakeStateEndpoint struct {
	srv *httptest.Server
	mu  sync.Mutex
	// state is what GET answers (nil: 204, no state).
	state []byte
	// lockCode answers LOCK (200 when zero).
	lockCode int
	// requests are "METHOD ?query" in order; posted is the last POST body.
	requests []string
	posted   []byte
}

func newStateEndpoint(t *testing.T) *fakeStateEndpoint {
	ep := &fakeStateEndpoint{}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != runnerapi.ChannelUsername || p != testCredential {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != channel.StatePathPrefix+"team-a/"+testSuffix {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		ep.mu.Lock()
		defer ep.mu.Unlock()
		ep.requests = append(ep.requests, strings.TrimSpace(r.Method+" "+strings.Split(r.URL.RawQuery, "=")[0]))
		switch r.Method {
		case methodLock:
			if ep.lockCode != 0 {
				w.WriteHeader(ep.lockCode)
				_, _ = io.WriteString(w, `{"ID":"someone-else"}`)
			}
		case methodUnlock:
		case http.MethodGet:
			if ep.state == nil {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			_, _ = w.Write(ep.state)
		case http.MethodPost:
			ep.posted, _ = io.ReadAll(r.Body)
		}
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *fakeStateEndpoint) attach(f *fixture) {
	dir := withChannel(f)
	write(f.t, filepath.Join(dir, runnerapi.ChannelAddressFile), ep.srv.URL)
}

const seedBackup = `{"version":4,"lineage":"kept-lineage","serial":7,"resources":[],"outputs":{"o":{"value":"old"}}}`

// A restore onto no state writes the backup as it is (its lineage and serial) under the state
// lock, without terraform's state push (which would give it a new lineage).
func TestRestoreOntoNoStateWritesTheBackupUnderTheLock(t *testing.T) {
	// What `state pull` prints for no state: nothing (local), or a placeholder with no lineage
	// (a remote backend, the channel included).
	for name, pulled := range map[string]string{"nothing": "", "placeholder": `{"version":4,"terraform_version":"1.10.10","serial":0,"lineage":"","outputs":{},"resources":[],"check_results":null}`} {
		t.Run(name, func(t *testing.T) { restoreOntoNoState(t, pulled) })
	}
}

func restoreOntoNoState(t *testing.T, pulled string) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	ep := newStateEndpoint(t)
	ep.attach(f)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), seedBackup)
	if pulled != "" {
		current := filepath.Join(t.TempDir(), "current")
		write(t, current, pulled)
		f.env("FAKE_TF_PULL=" + current)
	}
	res, code := f.run()
	if code != runnerapi.ExitOK || res.Outcome != runnerapi.OutcomeSucceeded {
		t.Fatalf("exit %d result %+v\n%s", code, res, f.out)
	}
	if want := []string{"LOCK", "GET", "POST ID", "UNLOCK"}; !slices.Equal(ep.requests, want) {
		t.Fatalf("requests %q, want %q", ep.requests, want)
	}
	if string(ep.posted) != seedBackup {
		t.Fatalf("posted %s, want the backup as it is", ep.posted)
	}
	for _, c := range f.calls() {
		if slices.Contains(c.Args, "push") {
			t.Fatalf("terraform pushed: %v", c.Args)
		}
	}
	var names []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{StepInit, StepStatePull, StepStatePush}) {
		t.Fatalf("steps %v", names)
	}
}

// The state appeared between the pull and the lock: nothing is written, the lock is released.
func TestRestoreOntoNoStateStopsWhenAStateAppeared(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	ep := newStateEndpoint(t)
	ep.state = []byte(`{"version":4,"lineage":"new","serial":1,"resources":[{"type":"x"}],"outputs":{}}`)
	ep.attach(f)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), seedBackup)
	res, code := f.run()
	if code == runnerapi.ExitOK || !strings.Contains(res.Error, "appeared") {
		t.Fatalf("exit %d result %+v", code, res)
	}
	if want := []string{"LOCK", "GET", "UNLOCK"}; !slices.Equal(ep.requests, want) {
		t.Fatalf("requests %q, want %q", ep.requests, want)
	}
}

// A lock held elsewhere: no write, no unlock of a lock the restore never took.
func TestRestoreOntoNoStateStopsAtAHeldLock(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	ep := newStateEndpoint(t)
	ep.lockCode = http.StatusLocked
	ep.attach(f)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), seedBackup)
	res, code := f.run()
	if code == runnerapi.ExitOK || !strings.Contains(res.Error, "LOCK with 423") {
		t.Fatalf("exit %d result %+v", code, res)
	}
	if want := []string{"LOCK"}; !slices.Equal(ep.requests, want) {
		t.Fatalf("requests %q, want %q", ep.requests, want)
	}
}

// A local run (the kubernetes backend) cannot keep the lineage, so it refuses.
func TestRestoreOntoNoStateRefusesWithoutTheChannel(t *testing.T) {
	f := newFixture(t, runnerapi.OperationRestore, nil)
	write(t, filepath.Join(f.cfg.InputsDir, runnerapi.KeyRestoreState), seedBackup)
	res, code := f.run()
	if code != runnerapi.ExitBadInput || !strings.Contains(res.Error, "needs the state channel") {
		t.Fatalf("exit %d result %+v", code, res)
	}
	for _, c := range f.calls() {
		if slices.Contains(c.Args, "push") {
			t.Fatalf("terraform pushed: %v", c.Args)
		}
	}
}
