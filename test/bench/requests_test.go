package bench

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// pokes is how many passes each scenario provokes.
const pokes = 20

// passes is how many reconcile passes the controller of kind has run in this process.
func passes(kind string) float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == kind {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// waitFor polls cond until it holds; a minute without it fails the test.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiesce waits until the controller of kind has run no pass for half a second, so that a
// count taken afterwards includes every request of every pass that was provoked.
func quiesce(kind string) {
	last, stable := passes(kind), 0
	for stable < 10 {
		time.Sleep(50 * time.Millisecond)
		if now := passes(kind); now != last {
			last, stable = now, 0
			continue
		}
		stable++
	}
}

// poke changes an annotation the engine ignores and waits until the controller of kind has run
// the pass it causes.
func poke(tb testing.TB, o client.Object, kind string, i int) {
	tb.Helper()
	before := passes(kind)
	for {
		fresh := o.DeepCopyObject().(client.Object)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
			tb.Fatal(err)
		}
		a := fresh.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["bench.captf.io/poke"] = fmt.Sprint(i)
		fresh.SetAnnotations(a)
		if err := k8s.Update(ctx, fresh); err == nil {
			break
		}
	}
	waitFor(tb, kind+" pass after a poke", func() bool { return passes(kind) > before })
}

// row is one measured scenario.
type row struct {
	scenario string
	kind     string
	passes   float64
	requests int
	byKind   map[string]int
}

func (r row) perPass() float64 {
	if r.passes == 0 {
		return 0
	}
	return float64(r.requests) / r.passes
}

// measure counts the manager's API requests and kind's passes while act runs.
func measure(c *counter, scenario, kind string, act func()) row {
	quiesce(kind)
	c.reset()
	before := passes(kind)
	act()
	quiesce(kind)
	byKind, total := c.snapshot()
	return row{scenario: scenario, kind: kind, passes: passes(kind) - before, requests: total, byKind: byKind}
}

// subject is one CAPTF object of the scenarios, with what its apply Job writes.
type subject struct {
	kind  string
	obj   client.Object
	state statetest.State
}

// variablesSource creates a ConfigMap that opted in as a variables source. Every subject reads
// one: a pass that reassembles its inputs instead of reusing the memoised hash reads it live,
// so the request counts catch a broken memo for every kind.
func variablesSource(tb testing.TB, ns, name string) []infrav1.VariablesSource {
	tb.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{inputs.VariablesLabel: inputs.VariablesLabelValue}}, Data: map[string]string{"region": "eu-west-1"}}
	if err := k8s.Create(ctx, cm); err != nil {
		tb.Fatal(err)
	}
	return []infrav1.VariablesSource{{ConfigMapRef: &infrav1.LocalObjectReference{Name: name}}}
}

// spec sets a subject's spec. Its drift checks are on (hourly), so the idle passes are passes
// between two checks: each judges the schedule, and must do it without an API request.
func spec(tb testing.TB, ns, name, vars string) func(*infrav1.TerraformSpec) {
	from := variablesSource(tb, ns, name+"-vars")
	return func(s *infrav1.TerraformSpec) {
		*s = infrav1.TerraformSpec{
			Module:        infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}},
			Variables:     &runtime.RawExtension{Raw: []byte(vars)},
			VariablesFrom: from,
			Drift:         infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: time.Hour}, Mode: infrav1.DriftModeReport},
		}
	}
}

// lastChecked records a drift check that just ended, as the engine does after one.
func lastChecked() map[string]string {
	return map[string]string{infrav1.LastDriftCheckAnnotation: time.Now().UTC().Format(time.RFC3339)}
}

func create(tb testing.TB, objs ...client.Object) {
	tb.Helper()
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			tb.Fatal(err)
		}
	}
}

func newCluster(tb testing.TB, ns string) subject {
	create(tb, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: "c1"}}})
	tc := objects.Cluster(ns, "c1").Annotations(lastChecked()).Spec(spec(tb, ns, "c1", `{"a":1}`)).Obj()
	create(tb, tc)
	return subject{kind: infrav1.TerraformClusterKind, obj: tc, state: statetest.Cluster("10.0.0.1", 6443)}
}

func newMachine(tb testing.TB, ns string) subject {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1"},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: "m1"}}}
	create(tb, boot, m)
	tm := objects.Machine(ns, "m1").Cluster("c1").Annotations(lastChecked()).Spec(spec(tb, ns, "m1", `{"flavor":"small"}`)).
		OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m1", UID: m.UID}).Obj()
	create(tb, tm)
	return subject{kind: infrav1.TerraformMachineKind, obj: tm, state: statetest.Machine("tf://m1")}
}

func newPool(tb testing.TB, ns string) subject {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p1-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p1"},
		Spec: clusterv1.MachinePoolSpec{ClusterName: "c1", Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
			ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachinePoolKind, Name: "p1"}}}}}
	create(tb, boot, mp)
	tp := objects.MachinePool(ns, "p1").Cluster("c1").Annotations(lastChecked()).Spec(spec(tb, ns, "p1", `{"instances":2}`)).
		OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: "p1", UID: mp.UID}).Obj()
	create(tb, tp)
	return subject{kind: infrav1.TerraformMachinePoolKind, obj: tp, state: statetest.MachinePool("tf://p1-0", "tf://p1-1")}
}

// provisionAndMeasure waits for the subject's first apply Job and measures three scenarios:
// passes while the Job runs (the Job controller created its pod, the scheduler bound it to the
// bench's node and the node runs it, and the Job counts it active and ready), the passes that
// count the Job once it finished (the node ends the pod, the Job controller completes the Job),
// and idle passes once the object is provisioned.
func provisionAndMeasure(tb testing.TB, c *counter, s subject) []row {
	tb.Helper()
	ns, name := s.obj.GetNamespace(), s.obj.GetName()
	suffix := naming.StateSuffix(ns, s.kind, name)
	job := &batchv1.Job{}
	key := client.ObjectKey{Namespace: ns, Name: naming.JobName(suffix, 1)}
	waitFor(tb, s.kind+" apply Job running on the bench's node", func() bool {
		return k8s.Get(ctx, key, job) == nil && job.Status.Active == 1 && ptr.Deref(job.Status.Ready, 0) == 1
	})
	var rows []row
	rows = append(rows, measure(c, s.kind+" Job running", s.kind, func() {
		for p := 0; p < pokes; p++ {
			poke(tb, s.obj, s.kind, p)
		}
	}))
	rows = append(rows, measure(c, s.kind+" Job just finished", s.kind, func() {
		if err := statetest.Write(ctx, k8s, ns, suffix, s.state); err != nil {
			tb.Fatal(err)
		}
		if err := node.end(ns, job.Name, true, ""); err != nil {
			tb.Fatal(err)
		}
		waitFor(tb, s.kind+" provisioned", func() bool {
			fresh := s.obj.DeepCopyObject().(client.Object)
			if k8s.Get(ctx, client.ObjectKeyFromObject(s.obj), fresh) != nil {
				return false
			}
			st, ok := fresh.(interface {
				GetTerraformStatus() *infrav1.TerraformStatus
			})
			return ok && st.GetTerraformStatus().IsProvisioned()
		})
	}))
	rows = append(rows, measure(c, s.kind+" idle", s.kind, func() {
		for p := 0; p < pokes; p++ {
			poke(tb, s.obj, s.kind, 100+p)
		}
	}))
	return rows
}

// requestScenarios runs the product's manager with a request counter and a state replica (an
// in-memory bucket: what replication costs a pass in API requests is what the rows show) and
// measures every scenario for a TerraformCluster, a TerraformMachine and a TerraformMachinePool
// of one Cluster (the machine and the pool wait for the cluster to be provisioned). It also
// returns what reached the replica.
func requestScenarios(tb testing.TB) ([]row, replicaTally) {
	tb.Helper()
	start(tb)
	c := &counter{n: map[string]int{}}
	store := benchReplica(tb)
	before := replicaAttempts()
	_, stop := startManagerOpts(tb, c.wrap, setup.Options{StateReplicaStore: store})
	defer stop()
	ns := namespace(tb, "req")
	subjects := []subject{newCluster(tb, ns)}
	rows := provisionAndMeasure(tb, c, subjects[0])
	subjects = append(subjects, newMachine(tb, ns))
	rows = append(rows, provisionAndMeasure(tb, c, subjects[1])...)
	subjects = append(subjects, newPool(tb, ns))
	rows = append(rows, provisionAndMeasure(tb, c, subjects[2])...)
	t := replicaTally{attempts: replicaAttempts() - before}
	for _, s := range subjects {
		t.stateVersions++ // each subject's one Job left one state version
		versions, err := store.List(ctx, replica.Ref{Namespace: ns, Kind: s.kind, Name: s.obj.GetName()})
		if err != nil {
			tb.Fatal(err)
		}
		t.stored += len(versions)
	}
	return rows, t
}

// replicaTally is what reached the replica in requestScenarios: the state versions the Jobs
// left, the versions the store holds, and the manager's write attempts (each one Put, one
// conditional create in the bucket).
type replicaTally struct {
	stateVersions, stored int
	attempts              float64
}

func (t replicaTally) print(w io.Writer) {
	fmt.Fprintf(w, "\nstate replica: %d state versions left by Jobs, %d versions in the store, %.0f store writes (%.2f per version)\n",
		t.stateVersions, t.stored, t.attempts, t.attempts/float64(max(t.stateVersions, 1)))
}

// benchReplica is a replica store over an in-memory bucket.
func benchReplica(tb testing.TB) *replica.Store {
	tb.Helper()
	key, err := replica.NewStaticKey("bench", make([]byte, 32))
	if err != nil {
		tb.Fatal(err)
	}
	bucket := memblob.OpenBucket(nil)
	tb.Cleanup(func() { _ = bucket.Close() })
	store, err := replica.New(bucket, key, replica.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// replicaAttempts is how many replications (store writes) the managers of this process made.
func replicaAttempts() float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "captf_state_replica_writes_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func printRows(w io.Writer, rows []row) {
	fmt.Fprintf(w, "\n%-40s %7s %9s %9s  %s\n", "scenario", "passes", "requests", "req/pass", "requests by verb and resource")
	for _, r := range rows {
		fmt.Fprintf(w, "%-40s %7.0f %9d %9.2f  %s\n", r.scenario, r.passes, r.requests, r.perPass(), format(r.byKind))
	}
}

// BenchmarkRequestsPerReconcile prints the API requests the manager sends per reconcile pass
// of each kind: while its Job runs (target 0), the passes that count a Job that just finished,
// and idle (target 0). TestRequestsPerPassGate asserts the targets in `make test`.
func BenchmarkRequestsPerReconcile(b *testing.B) {
	rows, rep := requestScenarios(b)
	printRows(os.Stdout, rows)
	rep.print(os.Stdout)
	for _, r := range rows {
		b.ReportMetric(r.perPass(), strings.ReplaceAll(r.scenario, " ", "-")+"-req/pass")
	}
}

// TestRequestsPerPassGate is the gate in `make test`: for each kind, a pass while its Job runs
// and an idle pass of a provisioned object between two drift checks send 0 API requests (everything they read comes
// from the cache or the inputs memo). Each scenario must have run at least one pass per poke,
// so a controller that stopped reconciling cannot pass the gate by doing nothing.
func TestRequestsPerPassGate(t *testing.T) {
	rows, rep := requestScenarios(t)
	printRows(os.Stdout, rows)
	rep.print(os.Stdout)
	// With a state replica configured: one store write per state version, and the idle and
	// running rows below still send no API request.
	if rep.stored != rep.stateVersions || rep.attempts != float64(rep.stateVersions) {
		t.Errorf("state replica: %d state versions, %d in the store, %.0f store writes; want one version stored and one write each", rep.stateVersions, rep.stored, rep.attempts)
	}
	for _, r := range rows {
		if strings.HasSuffix(r.scenario, "Job just finished") {
			continue // bookkeeping a finished Job reads and writes by design; printed only
		}
		if r.passes < pokes {
			t.Errorf("%s: %.0f passes for %d pokes; the controller did not reconcile as provoked", r.scenario, r.passes, pokes)
		}
		if r.requests != 0 {
			t.Errorf("%s: %d API requests in %.0f passes (%.2f per pass), want 0: %s", r.scenario, r.requests, r.passes, r.perPass(), format(r.byKind))
		}
	}
}

func format(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
