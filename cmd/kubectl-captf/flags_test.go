package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// readyCluster is a TerraformCluster of namespace ns, Ready and with nothing waiting.
func readyCluster(ns, name string) *infrav1.TerraformCluster {
	o := waitingCluster()
	o.Namespace, o.Name, o.UID = ns, name, types.UID("uid-"+ns+"-"+name)
	delete(o.Annotations, infrav1.PendingPlanAnnotation)
	o.Status.Conditions = o.Status.Conditions[:1]
	return o
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// status -A shows the objects of every namespace, grouped by namespace and Cluster, and
// refuses what names objects of one namespace.
func TestStatusAllNamespaces(t *testing.T) {
	a, b := readyCluster("alpha", "one"), readyCluster("beta", "two")
	loose := objects.Machine("beta", "loose").NoCluster().Obj()
	objs := []client.Object{namespace("prod"), a, b, loose}

	out, err := runStatus(t, objs)
	if err == nil && strings.Contains(out, "alpha") {
		t.Fatalf("without -A status shows another namespace:\n%s", out)
	}
	out, err = runStatus(t, objs, "-A")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitNotReady {
		t.Fatalf("want exit %d (beta/loose reports no Ready), got %v\n%s", exitNotReady, err, out)
	}
	ia, il, ib := strings.Index(out, "Cluster alpha/prod\n"), strings.Index(out, "beta: (no cluster.x-k8s.io/cluster-name label)\n"), strings.Index(out, "Cluster beta/prod\n")
	if ia < 0 || ib < 0 || il < 0 || !(ia < il && il < ib) {
		t.Fatalf("want groups alpha/prod, beta without a label, beta/prod, in that order:\n%s", out)
	}
	if !strings.Contains(out[ia:il], "TerraformCluster/one") || !strings.Contains(out[il:ib], "TerraformMachine/loose") || !strings.Contains(out[ib:], "TerraformCluster/two") {
		t.Fatalf("each object under its group:\n%s", out)
	}
	for _, args := range [][]string{{"-A", "--cluster", "prod"}, {"-A", "tfc/one"}} {
		if _, err := runStatus(t, objs, args...); err == nil || !strings.Contains(err.Error(), "-A shows every namespace") {
			t.Fatalf("status %v: want a refusal, got %v", args, err)
		}
	}
	// No object anywhere is an empty report, not a missing namespace.
	if out, err := runStatus(t, nil, "-A"); err != nil || !strings.Contains(out, "no TerraformCluster") {
		t.Fatalf("status -A of an empty cluster: %v\n%s", err, out)
	}
}

// status -o wide is a table, one object a row, with a NAMESPACE column under -A.
func TestStatusWide(t *testing.T) {
	waiting := waitingCluster()
	running := readyCluster("prod", "busy")
	start := metav1.NewTime(now.Add(-time.Minute))
	running.Status.ActiveJob = &infrav1.ActiveJob{Name: "captf-busy-4", Operation: infrav1.OperationApply, StartTime: &start}
	objs := []client.Object{waiting, running, inventorySecret(t, waiting, oneResource("terraform_data.a"))}

	out, err := runStatus(t, objs, "-o", "wide")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitAttention {
		t.Fatalf("want exit %d (a plan waits), got %v\n%s", exitAttention, err, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "KIND NAME CLUSTER READY REASON SINCE JOB LAST RUN PLAN DRIFT RESOURCES" {
		t.Fatalf("header: %q", lines[0])
	}
	busy, prod := lines[1], lines[2]
	for _, want := range []string{"TerraformCluster", "busy", "True", "Apply captf-busy-4", "Plan Succeeded "} {
		if !strings.Contains(busy, want) {
			t.Fatalf("row of busy lacks %q: %q", want, busy)
		}
	}
	for _, want := range []string{"prod", "waits (create 1, update 0, replace 1, delete 0)", "False", "  1"} {
		if !strings.Contains(prod, want) {
			t.Fatalf("row of prod lacks %q: %q", want, prod)
		}
	}
	out, _ = runStatus(t, objs, "-A", "-o", "wide")
	if !strings.HasPrefix(out, "NAMESPACE") || !strings.Contains(out, "\nprod ") {
		t.Fatalf("-A -o wide has a NAMESPACE column:\n%s", out)
	}
	if _, err := runStatus(t, objs, "-o", "table"); err == nil || !strings.Contains(err.Error(), "unknown output format") {
		t.Fatalf("-o table: %v", err)
	}
}

func oneResource(addr string) state.Inventory {
	return state.Inventory{Serial: 1, Total: 1, Managed: 1, Resources: []state.InventoryResource{{Address: addr, Type: "terraform_data", Mode: "managed"}}}
}

// lines is an io.Writer that a test can wait on: each Write signals.
type lines struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{}
}

func newLines() *lines { return &lines{written: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	select {
	case l.written <- struct{}{}:
	default:
	}
	return n, err
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until the output holds want, or fails after a generous deadline.
func (l *lines) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(l.String(), want) {
		select {
		case <-l.written:
		case <-deadline:
			t.Fatalf("output never held %q:\n%s", want, l.String())
		}
	}
}

// countingLists counts the lists made through it: a test sees when a watch has read again.
type countingLists struct {
	client.WithWatch
	lists atomic.Int64
}

func (c *countingLists) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.WithWatch.List(ctx, l, opts...)
}

// status --watch prints the report, then again when a watched object changes what it prints
// (not when a change only makes its ages older), and ends with the last report's exit code when
// interrupted.
func TestStatusWatch(t *testing.T) {
	now := time.Now()
	o := readyCluster("prod", "prod")
	o.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
	c := &countingLists{WithWatch: fakeClient(t, namespace("prod"), o)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	out := newLines()
	done := make(chan error, 1)
	go func() {
		_, err := runPluginAt(t, ctx, c, out, clock, "status", "--watch")
		done <- err
	}()
	out.waitFor(t, "TerraformCluster/prod  Ready 1m ago")
	perReport := c.lists.Load()

	// An hour later a write that changes nothing the report shows: the ages alone would differ.
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	live := &infrav1.TerraformCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatal(err)
	}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations["note"] = "nothing the report shows"
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	// The watch has read everything for its next report: whatever it prints for the
	// annotation is printed before it reads the next event.
	deadline := time.Now().Add(30 * time.Second)
	for c.lists.Load() < 2*perReport {
		if time.Now().After(deadline) {
			t.Fatal("the watch never read again after the annotation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	live = &infrav1.TerraformCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: "ApplyFailed", Message: "the apply failed"})
	// The fake client keeps no status subresource for the kind: an update writes the status.
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "NotReady (ApplyFailed)")
	text := out.String()
	// The watch handles events in order: a report for the label would stand between the two.
	if strings.Count(text, "TerraformCluster/prod") != 2 || !strings.Contains(text, "\n# ") {
		t.Fatalf("want two reports (none for the label), the second after a time line:\n%s", text)
	}
	cancel()
	err := <-done
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitNotReady {
		t.Fatalf("want the last report's exit code %d, got %v", exitNotReady, err)
	}
}

// version --client prints the plugin's version without reaching a cluster; the release build
// (hack/krew/release.sh) stamps the tag and ships the completion script.
func TestVersion(t *testing.T) {
	out, err := runPlugin(t, context.Background(), fakeClient(t), &bytes.Buffer{}, "version", "--client", "-o", "json")
	if err != nil {
		t.Fatalf("version --client: %v\n%s", err, out)
	}
	var v VersionView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.Server != nil || v.Plugin.Version == "" || v.Plugin.GoVersion != runtime.Version() || v.Plugin.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("version: %+v", v)
	}
	if testing.Short() {
		return
	}
	dir := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	release := exec.Command(filepath.Join(repo, "hack", "krew", "release.sh"), dir, "v9.8.7", runtime.GOOS+"/"+runtime.GOARCH)
	release.Dir = repo
	if b, err := release.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	unpacked := t.TempDir()
	if b, err := exec.Command("tar", "-C", unpacked, "-xzf", filepath.Join(dir, "kubectl-captf_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, b)
	}
	b, err := exec.Command(filepath.Join(unpacked, "kubectl-captf"), "version", "--client").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(b), "kubectl-captf: v9.8.7 (") {
		t.Fatalf("the released binary's version: %v\n%s", err, b)
	}
	if fi, err := os.Stat(filepath.Join(unpacked, "kubectl_complete-captf")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the archive's completion script: %v", err)
	}
}

// Completion answers cobra's protocol: the kinds first, then the objects of the kind typed,
// and the Clusters for --cluster.
func TestCompletion(t *testing.T) {
	objs := []client.Object{readyCluster("prod", "prod"), readyCluster("prod", "prod-eu"), readyCluster("other", "elsewhere"),
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "prod"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}}}
	complete := func(args ...string) []string {
		t.Helper()
		out, err := runPlugin(t, context.Background(), fakeClient(t, objs...), &bytes.Buffer{}, append([]string{"__complete"}, args...)...)
		if err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
				got = append(got, l)
			}
		}
		return got
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	check(complete("status", ""), "terraformcluster/", "terraformmachine/", "terraformmachinepool/")
	check(complete("approve", "terraformm"), "terraformmachine/", "terraformmachinepool/")
	check(complete("status", "tfc/"), "tfc/prod", "tfc/prod-eu")
	check(complete("plan", "show", "terraformcluster/prod-"), "terraformcluster/prod-eu")
	check(complete("logs", "tfc/prod", ""))
	check(complete("status", "-o", ""), "json", "yaml", "wide")
	check(complete("status", "--cluster", ""), "prod")
}
