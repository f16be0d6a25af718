package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// fixture is one run against the fake terraform.
type fixture struct {
	t      *testing.T
	cfg    Config
	record string
	out    *lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const testSuffix = "0123456789abcdef"

func newFixture(t *testing.T, op string, redact []string) *fixture {
	t.Helper()
	root := t.TempDir()
	module, inputs, work := filepath.Join(root, "module"), filepath.Join(root, "inputs"), filepath.Join(root, "work")
	for _, d := range []string{module, inputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(module, "main.tf"), `resource "terraform_data" "x" {}`)
	write(t, filepath.Join(inputs, runnerapi.KeyVariables), `{"name":"alpha"}`)
	write(t, filepath.Join(inputs, runnerapi.KeyBackend), `{"namespace":"team-a","secret_suffix":"`+testSuffix+`"}`)
	rb, _ := json.Marshal(redact)
	write(t, filepath.Join(inputs, runnerapi.KeyRedact), string(rb))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(root, "calls.jsonl")
	out := &lockedBuffer{}
	return &fixture{t: t, record: rec, out: out, cfg: Config{
		Invocation: runnerapi.Invocation{
			Operation:   op,
			ModuleDir:   module,
			InputsDir:   inputs,
			WorkDir:     work,
			ResultFile:  filepath.Join(root, "result.json"),
			LockTimeout: 42 * time.Second,
			Binary:      self,
		},
		Environ: []string{"PATH=" + os.Getenv("PATH"), "FAKE_TF_RECORD=" + rec},
		Stdout:  out,
	}}
}

func (f *fixture) env(kv ...string) { f.cfg.Environ = append(f.cfg.Environ, kv...) }

// run runs the fixture and checks that the result file holds the returned result.
func (f *fixture) run() (runnerapi.Result, int) {
	f.t.Helper()
	res, code := Run(context.Background(), f.cfg)
	b, err := os.ReadFile(f.cfg.ResultFile)
	if err != nil {
		f.t.Fatalf("result file: %v", err)
	}
	if len(b) > runnerapi.MaxResultBytes {
		f.t.Fatalf("result file has %d bytes", len(b))
	}
	var onDisk runnerapi.Result
	if err := json.Unmarshal(b, &onDisk); err != nil {
		f.t.Fatalf("result file is not JSON: %v\n%s", err, b)
	}
	if onDisk.Outcome != res.Outcome || onDisk.Operation != res.Operation {
		f.t.Fatalf("result file %s differs from the returned result %+v", b, res)
	}
	return res, code
}

// calls returns the recorded invocations (events excluded).
func (f *fixture) calls() []fakeCall {
	var out []fakeCall
	for _, c := range f.all() {
		if c.Event == "" {
			out = append(out, c)
		}
	}
	return out
}

func (f *fixture) all() []fakeCall {
	file, err := os.Open(f.record)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	var out []fakeCall
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var c fakeCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			continue // a line being written
		}
		out = append(out, c)
	}
	return out
}

func (f *fixture) events(name string) []fakeCall {
	var out []fakeCall
	for _, c := range f.all() {
		if c.Event == name {
			out = append(out, c)
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func argsOf(calls []fakeCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, strings.Join(c.Args, " "))
	}
	return out
}
