package capimanager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// fakeEnv turns the test binary into a stand-in manager: it binds --health-addr and
// --webhook-port as a Cluster API manager does and answers /readyz, or, with fakeFailEnv set,
// fails with that message. A webhook port it cannot bind ends it as a real manager ends: the
// error, then more lines from its other runnables stopping (more than Start's tail keeps).
const (
	fakeEnv     = "CAPIMANAGER_TEST_FAKE"
	fakeFailEnv = "CAPIMANAGER_TEST_FAIL"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" {
		os.Exit(fakeManager())
	}
	os.Exit(m.Run())
}

func fakeManager() int {
	if msg := os.Getenv(fakeFailEnv); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		return 1
	}
	var addr, webhookPort string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--health-addr="); ok {
			addr = v
		}
		if v, ok := strings.CutPrefix(a, "--webhook-port="); ok {
			webhookPort = v
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "problem running manager: failed to start health probes: %v\n", err)
		return 1
	}
	wl, err := net.Listen("tcp", ":"+webhookPort)
	if err != nil {
		fmt.Fprintf(os.Stderr, "problem running manager: %v\n", err)
		for i := range 100 {
			fmt.Fprintf(os.Stderr, "failed to get informer from cache: timeout waiting for informer %d to sync\n", i)
		}
		return 1
	}
	defer func() { _ = wl.Close() }()
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	return 0
}

// syncWriter is a writer the test reads while the manager's output is copied into it.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// fakeOptions installs the test binary as the core manager's binary.
func fakeOptions(t *testing.T, out *syncWriter) Options {
	t.Helper()
	t.Setenv(fakeEnv, "1")
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, Core.Binary)); err != nil {
		t.Fatal(err)
	}
	webhookPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return Options{BinDir: bin, Config: &rest.Config{Host: "https://127.0.0.1:1"}, WorkDir: t.TempDir(), CertDir: t.TempDir(),
		WebhookPort: webhookPort, Output: out}
}

// A health port taken between the look for a free port and the manager's bind (another
// sandbox's, an outgoing connection's) makes the manager exit: Start starts it again with new
// ports, and says so.
func TestStartAgainWhenAPortWasTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return proc.FreePort()
	}
	t.Cleanup(func() { freePort = proc.FreePort })
	out := &syncWriter{}
	r, err := Start(context.Background(), fakeOptions(t, out))
	if err != nil {
		t.Fatalf("start: %v\noutput:\n%s", err, out)
	}
	defer func() { _ = r.Stop() }()
	for _, want := range []string{"address already in use", "exited before it was ready, a port taken (attempt 1 of 3): starting it again with new ports"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// takenWebhookPortOptions is fakeOptions with a webhook port the test holds (on every
// interface, as the manager binds it) until it ends.
func takenWebhookPortOptions(t *testing.T, out *syncWriter) Options {
	t.Helper()
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	opts := fakeOptions(t, out)
	opts.WebhookPort = taken.Addr().(*net.TCPAddr).Port
	return opts
}

// The webhook port is chosen when the webhook configurations are installed, long before the
// manager starts: taken in between, it is replaced by a new one the configurations are pointed
// at (MoveWebhookPort) before the manager starts again, even when the manager's last words
// (the tail Start keeps) no longer hold the bind error.
func TestStartAgainOnANewWebhookPortWhenItWasTaken(t *testing.T) {
	out := &syncWriter{}
	opts := takenWebhookPortOptions(t, out)
	var moves []int
	opts.MoveWebhookPort = func(_ context.Context, port int) error {
		moves = append(moves, port)
		return nil
	}
	r, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start: %v\noutput:\n%s", err, out)
	}
	defer func() { _ = r.Stop() }()
	if len(moves) != 1 || moves[0] == opts.WebhookPort {
		t.Fatalf("want the webhook configurations moved once to a new port, got moves %v (the taken port %d)", moves, opts.WebhookPort)
	}
	if !strings.Contains(r.cmd.String(), "--webhook-port="+strconv.Itoa(moves[0])) {
		t.Fatalf("the manager runs as %q, not on the new webhook port %d", r.cmd.String(), moves[0])
	}
}

// A webhook port move that fails ends Start with that error: the manager does not start on a
// port its webhook configurations do not name.
func TestAFailedWebhookPortMoveEndsStart(t *testing.T) {
	out := &syncWriter{}
	opts := takenWebhookPortOptions(t, out)
	opts.MoveWebhookPort = func(context.Context, int) error { return fmt.Errorf("webhook configuration not found") }
	_, err := Start(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "move the webhook port: webhook configuration not found") {
		t.Fatalf("want the move's error, got %v", err)
	}
	if strings.Contains(out.String(), "starting it again") {
		t.Fatalf("started again after a failed move:\n%s", out)
	}
}

// Any other early exit ends Start at once, with the end of the manager's output in the error.
func TestAnEarlyExitSaysWhy(t *testing.T) {
	out := &syncWriter{}
	opts := fakeOptions(t, out)
	t.Setenv(fakeFailEnv, "no matches for kind MachinePool: the CRDs are missing")
	_, err := Start(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "the CRDs are missing") {
		t.Fatalf("want the manager's last words in the error, got %v", err)
	}
	if strings.Contains(out.String(), "starting it again") {
		t.Fatalf("started again for another cause:\n%s", out)
	}
}
