package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// Environment variables that run another fleet.
const (
	envN        = "CAPTF_BENCH_FLEET_N"
	envParallel = "CAPTF_BENCH_FLEET_PARALLEL"
	envBinary   = "CAPTF_BENCH_FLEET_BINARY"
)

const (
	defaultN = 1000
	// defaultParallel is the manager's default --max-active-jobs.
	defaultParallel = 50
	// deploymentMemoryLimit is the manager container's memory limit in config/manager (512Mi);
	// the manager sets its soft memory limit from it (setup.MemoryLimit).
	deploymentMemoryLimit = 512 << 20
	// createWorkers create the fleet's objects at once.
	createWorkers = 8
	// heapEvery is how often the manager's metrics are read.
	heapEvery = 500 * time.Millisecond
	// progressEvery is how often a long run says how far it got.
	progressEvery = 30 * time.Second
)

// machineModule is the module of every machine, the fleet's and the floor's: no provider, no
// resource, the one output a TerraformMachine needs to be Ready (docs/module-contract.md).
const machineModule = `variable "captf" {
  type = any
}

output "provider_id" {
  value = "captf://${var.captf.namespace}/${var.captf.name}"
}
`

// clusterModule is the TerraformCluster's: the one output a cluster needs.
const clusterModule = `variable "captf" {
  type = any
}

output "control_plane_endpoint" {
  value = {
    host = "${var.captf.cluster_name}.${var.captf.namespace}.example.internal"
    port = 6443
  }
}
`

// Names of the fleet's fixtures.
const (
	fleetNamespace   = "fleet"
	floorNamespace   = "floor"
	clusterName      = "fleet"
	machineModuleCM  = "machine-module"
	clusterModuleCM  = "cluster-module"
	bootstrapSecret  = "bootstrap"
	bootstrapPayload = "#cloud-config\nruncmd:\n- echo joined\n"
)

// settings are what one run measures.
type settings struct {
	n, parallel int
	// tf is the tofu or terraform the runner runs, tfVersion the first line of its version.
	tf, tfVersion string
	// softLimit is the manager's soft memory limit (from deploymentMemoryLimit).
	softLimit int64
}

func positiveEnv(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

func readSettings(b *testing.B, binDir string) settings {
	b.Helper()
	s := settings{n: positiveEnv(b, envN, defaultN), parallel: positiveEnv(b, envParallel, defaultParallel)}
	s.tf = os.Getenv(envBinary)
	if s.tf == "" {
		s.tf = os.Getenv("CAPTF_TEST_TOFU")
	}
	if s.tf == "" {
		tf, err := sandbox.FindTerraform(binDir)
		if err != nil {
			b.Fatal(err)
		}
		s.tf = tf
	}
	out, err := exec.Command(s.tf, "version").Output()
	if err != nil {
		b.Fatalf("%s version: %v", s.tf, err)
	}
	s.tfVersion = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	limit, err := setup.MemoryLimit(func(k string) string {
		if k == setup.EnvMemoryLimit {
			return strconv.Itoa(deploymentMemoryLimit)
		}
		return ""
	})
	if err != nil {
		b.Fatal(err)
	}
	s.softLimit = limit
	return s
}

// BenchmarkFleetThroughput creates N TerraformMachines at once in the sandbox and measures
// the time until all are Ready and the manager's peak heap, against the floor: N runner
// executions of the same module at the same parallelism with no controller (doc.go).
//
//	CAPTF_BENCH_FLEET_N=50 go test -run '^$' -bench FleetThroughput -benchtime=1x -timeout 120m ./test/fleetbench/
func BenchmarkFleetThroughput(b *testing.B) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.ConsoleEncoder()))
	repo, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	binDir := filepath.Join(repo, "bin")
	s := readSettings(b, binDir)
	fmt.Fprintf(os.Stderr, "fleet: %d machines, parallelism %d, %s (%s)\n", s.n, s.parallel, s.tfVersion, s.tf)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	built := buildBinaries(b, repo)
	metricsAddr := freeLoopback(b)
	mgrOut := &tail{max: 64 << 10}
	// The manager inherits the bench's environment: it runs under the Deployment's soft limit.
	b.Setenv(setup.EnvMemoryLimit, strconv.Itoa(deploymentMemoryLimit))
	began := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Name: "fleet", RepoRoot: repo, BinDir: binDir,
		ManagerBinary: filepath.Join(built, "manager"), RunnerBinary: filepath.Join(built, "runner"),
		TerraformBinary: s.tf, ManagerOutput: mgrOut, Log: ctrl.Log.WithName("sandbox"),
		// The last flag wins: the metrics on a loopback port, the Job slots the floor uses too.
		ManagerArgs: []string{"--metrics-bind-address=" + metricsAddr, "--max-active-jobs=" + strconv.Itoa(s.parallel)},
	})
	if err != nil {
		b.Fatalf("start the sandbox: %v", err)
	}
	b.Cleanup(func() {
		// The bench's informer first: the API server waits for open watches when it stops.
		cancel()
		if err := sb.Stop(); err != nil {
			b.Errorf("stop the sandbox: %v", err)
		}
	})
	fmt.Fprintf(os.Stderr, "fleet: sandbox ready in %s\n", time.Since(began).Round(time.Millisecond))

	floor := runFloor(ctx, b, sb, s, filepath.Join(built, "runner"))
	fmt.Fprintf(os.Stderr, "fleet: floor of %d executions took %s\n", s.n, floor.Round(time.Millisecond))
	r := runFleet(ctx, b, sb, s, metricsAddr, mgrOut)
	printResult(s, floor, r)
	ratio := r.all.Seconds() / floor.Seconds()
	b.ReportMetric(float64(s.n), "machines")
	b.ReportMetric(float64(s.parallel), "parallelism")
	b.ReportMetric(r.all.Seconds(), "s-all-ready")
	b.ReportMetric(floor.Seconds(), "s-floor")
	b.ReportMetric(ratio, "controller/floor")
	b.ReportMetric(mib(r.heap.peakHeap), "peak-heap-MiB")
	b.ReportMetric(mib(r.heap.peakRSS), "peak-rss-MiB")
}

// buildBinaries builds this checkout's manager and runner into a temporary folder, so the
// bench never measures stale binaries.
func buildBinaries(b *testing.B, repo string) string {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/manager", "./cmd/runner")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the manager and the runner: %v\n%s", err, out)
	}
	return dir
}

// freeLoopback is a loopback address whose port was free a moment ago.
func freeLoopback(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return addr
}

// fleetResult is what the controller's run cost.
type fleetResult struct {
	// all is from the first create until the last TerraformMachine was seen Ready; created
	// until the last object was created.
	all, created time.Duration
	// runs are the Pods of the machines' Jobs the executor ran, failed those that failed.
	runs, failed int
	heap         heapPeaks
}

// runFleet applies the cluster, then creates the machines at once and waits until every one
// is Ready, sampling the manager's heap meanwhile.
func runFleet(ctx context.Context, b *testing.B, sb *sandbox.Sandbox, s settings, metricsAddr string, mgrOut *tail) fleetResult {
	b.Helper()
	c := sb.Client()
	applyCluster(ctx, b, c)
	watch := watchReady(ctx, b, sb, s.n)
	sampler := sampleHeap(ctx, "http://"+metricsAddr+"/metrics", heapEvery)
	t0 := time.Now()
	if err := createMachines(ctx, c, s.n); err != nil {
		sampler.stop()
		b.Fatalf("create the machines: %v", err)
	}
	created := time.Since(t0)
	fmt.Fprintf(os.Stderr, "fleet: %d machines created in %s\n", s.n, created.Round(time.Millisecond))
	all, err := watch.wait(ctx, t0, sb, deadline(s))
	peaks := sampler.stop()
	if err != nil {
		b.Fatalf("%v\nthe manager's last output:\n%s", err, mgrOut.String())
	}
	if peaks.samples == 0 {
		b.Fatalf("no sample of the manager's heap (%d failed reads): %v", peaks.failures, peaks.lastErr)
	}
	r := fleetResult{all: all, created: created, heap: peaks}
	for _, run := range sb.Executor().Runs() {
		if run.Namespace != fleetNamespace || run.OwnerKind != infrav1.TerraformMachineKind {
			continue
		}
		r.runs++
		if run.Phase != corev1.PodSucceeded {
			r.failed++
		}
	}
	return r
}

// deadline bounds the wait for the fleet: generous, the bench asserts no time.
func deadline(s settings) time.Duration {
	return 10*time.Minute + time.Duration(s.n)*10*time.Second/time.Duration(min(s.parallel, 10))
}

// applyCluster creates the modules, the bootstrap data, the Cluster and its TerraformCluster,
// and waits until the cluster's infrastructure is provisioned.
func applyCluster(ctx context.Context, b *testing.B, c client.Client) {
	b.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: machineModuleCM}, Data: map[string]string{"main.tf": machineModule}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterModuleCM}, Data: map[string]string{"main.tf": clusterModule}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: bootstrapSecret, Labels: labels},
			Type: clusterv1.ClusterSecretType, StringData: map[string]string{"format": "cloud-config", "value": bootstrapPayload}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterName},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: clusterName}}},
		&infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterName, Labels: labels},
			Spec: infrav1.TerraformClusterSpec{TerraformSpec: infrav1.TerraformSpec{Module: infrav1.ModuleSource{
				ConfigMap: &infrav1.ConfigMapModule{Name: clusterModuleCM}}}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			b.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	began := time.Now()
	err := poll(ctx, 5*time.Minute, func() (bool, error) {
		tc := &infrav1.TerraformCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: clusterName}, tc); err != nil {
			return false, err
		}
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: clusterName}, cl); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(tc.Status.Conditions, infrav1.ReadyCondition) &&
			ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false), nil
	})
	if err != nil {
		b.Fatalf("the fleet's cluster: %v", err)
	}
	fmt.Fprintf(os.Stderr, "fleet: cluster Ready in %s\n", time.Since(began).Round(time.Millisecond))
}

// poll calls done every 500 ms until it is true, fails or timeout passed.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := done()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done within %s (last error: %v): %w", timeout, err, ctx.Err())
		case <-t.C:
		}
	}
}

func machineName(i int) string { return fmt.Sprintf("m-%04d", i) }

// createMachines creates n TerraformMachines and their Machines with createWorkers workers.
func createMachines(ctx context.Context, c client.Client, n int) error {
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	work := make(chan int)
	errs := make(chan error, createWorkers)
	var wg sync.WaitGroup
	for w := 0; w < createWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := machineName(i)
				tm := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: name, Labels: labels},
					Spec: infrav1.TerraformMachineSpec{TerraformSpec: infrav1.TerraformSpec{Module: infrav1.ModuleSource{
						ConfigMap: &infrav1.ConfigMapModule{Name: machineModuleCM}}}}}
				m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: name, Labels: labels},
					Spec: clusterv1.MachineSpec{ClusterName: clusterName, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapSecret)},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: name}}}
				for _, o := range []client.Object{tm, m} {
					if err := c.Create(ctx, o); err != nil {
						select {
						case errs <- fmt.Errorf("create %T %s: %w", o, name, err):
						default:
						}
						return
					}
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case err := <-errs:
			errs <- err
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(drain(errs)...)
}

func drain(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// readyWatch records when an informer of the bench first saw each TerraformMachine Ready.
type readyWatch struct {
	n     int
	cache cache.Cache
	mu    sync.Mutex
	ready map[string]time.Time
	all   chan struct{}
}

// watchReady starts an informer on the fleet's TerraformMachines (stopped with ctx).
func watchReady(ctx context.Context, b *testing.B, sb *sandbox.Sandbox, n int) *readyWatch {
	b.Helper()
	c, err := cache.New(sb.Config(), cache.Options{Scheme: sb.Scheme(), DefaultNamespaces: map[string]cache.Config{fleetNamespace: {}}})
	if err != nil {
		b.Fatal(err)
	}
	w := &readyWatch{n: n, cache: c, ready: map[string]time.Time{}, all: make(chan struct{})}
	inf, err := c.GetInformer(ctx, &infrav1.TerraformMachine{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.seen,
		UpdateFunc: func(_, obj any) { w.seen(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the bench's informer did not sync")
	}
	return w
}

func (w *readyWatch) seen(obj any) {
	tm, ok := obj.(*infrav1.TerraformMachine)
	if !ok || !meta.IsStatusConditionTrue(tm.Status.Conditions, infrav1.ReadyCondition) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, done := w.ready[tm.Name]; done {
		return
	}
	w.ready[tm.Name] = time.Now()
	if len(w.ready) == w.n {
		close(w.all)
	}
}

func (w *readyWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ready)
}

// wait waits until all are Ready and returns the time from t0 until the last was, saying how
// far the fleet got every progressEvery.
func (w *readyWatch) wait(ctx context.Context, t0 time.Time, sb *sandbox.Sandbox, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-w.all:
			w.mu.Lock()
			defer w.mu.Unlock()
			var last time.Time
			for _, at := range w.ready {
				if at.After(last) {
					last = at
				}
			}
			return last.Sub(t0), nil
		case <-t.C:
			fmt.Fprintf(os.Stderr, "fleet: %d/%d Ready after %s; %d runs ended; not Ready: %s\n", w.count(), w.n,
				time.Since(t0).Round(time.Second), len(sb.Executor().Runs()), w.waiting(ctx))
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d TerraformMachines Ready after %s (not Ready: %s): %w", w.count(), w.n,
				time.Since(t0).Round(time.Second), w.waiting(context.Background()), ctx.Err())
		}
	}
}

// waiting counts the machines that are not Ready by their Ready condition's reason.
func (w *readyWatch) waiting(ctx context.Context) string {
	var list infrav1.TerraformMachineList
	if err := w.cache.List(ctx, &list); err != nil {
		return err.Error()
	}
	by := map[string]int{}
	for i := range list.Items {
		cond := meta.FindStatusCondition(list.Items[i].Status.Conditions, infrav1.ReadyCondition)
		switch {
		case cond == nil:
			by["no Ready condition"]++
		case cond.Status != metav1.ConditionTrue:
			by[cond.Reason]++
		}
	}
	if missing := w.n - len(list.Items); missing > 0 {
		by["not created"] += missing
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// printResult prints the run as a table.
func printResult(s settings, floor time.Duration, r fleetResult) {
	fmt.Printf("\nfleet throughput: %d TerraformMachines created at once in the sandbox (one manager, --max-active-jobs %d,\n"+
		"soft memory limit %.1f MiB), against the floor: %d runner executions (channel and runner) of the same module,\n"+
		"%d at a time, no controller; heap and RSS are the manager's, peaks of samples every %s\n",
		s.n, s.parallel, mib(uint64(s.softLimit)), s.n, s.parallel, heapEvery)
	fmt.Printf("%-9s %-11s %-20s %13s %11s %16s %15s %14s %10s %9s\n", "machines", "parallelism", "binary",
		"all Ready", "floor", "controller/floor", "peak heap", "peak RSS", "Jobs run", "created")
	fmt.Printf("%-9d %-11d %-20s %12.1fs %10.1fs %15.2fx %11.1f MiB %10.1f MiB %10d %8.1fs\n", s.n, s.parallel, s.tfVersion,
		r.all.Seconds(), floor.Seconds(), r.all.Seconds()/floor.Seconds(), mib(r.heap.peakHeap), mib(r.heap.peakRSS), r.runs, r.created.Seconds())
	if r.failed > 0 {
		fmt.Printf("%d of the fleet's %d Job runs failed (retried by the controller)\n", r.failed, r.runs)
	}
	fmt.Printf("heap samples: %d (%d failed reads); the manager's heap when the machines were created: %.1f MiB\n",
		r.heap.samples, r.heap.failures, mib(r.heap.firstHeap))
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	// Trimmed once it holds twice what it keeps, so a write copies nothing most of the time.
	if len(t.buf) > 2*t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf[max(0, len(t.buf)-t.max):])
}

// newUID is an owner UID for the floor's channels (they break no lock, so it names nothing).
func newUID() string { return string(uuid.NewUUID()) }
