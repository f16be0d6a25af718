package bench

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

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

func waitFor(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiesce waits until the controller of kind has run no pass for a while.
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

// poke changes an annotation the engine ignores, which costs the manager one pass.
func poke(b *testing.B, o client.Object, i int) {
	b.Helper()
	for {
		fresh := o.DeepCopyObject().(client.Object)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
			b.Fatal(err)
		}
		a := fresh.GetAnnotations()
		a["bench.captf.io/poke"] = fmt.Sprint(i)
		fresh.SetAnnotations(a)
		if err := k8s.Update(ctx, fresh); err == nil {
			return
		}
	}
}

func finishJob(b *testing.B, job *batchv1.Job, st statetest.State) {
	b.Helper()
	if err := statetest.Write(ctx, k8s, job.Namespace, naming.StateSuffix(job.Namespace, infrav1.TerraformClusterKind, "c1"), st); err != nil {
		b.Fatal(err)
	}
	pod, err := envtest.StartJob(ctx, k8s, job)
	if err != nil {
		b.Fatal(err)
	}
	if err := envtest.FinishJob(ctx, k8s, job, pod, true, ""); err != nil {
		b.Fatal(err)
	}
}

type row struct {
	scenario string
	passes   float64
	requests int
	byKind   map[string]int
}

// BenchmarkRequestsPerReconcile counts the API requests the manager sends per reconcile pass
// of a TerraformCluster: idle (target 0), with its Job running (target 0), and the passes
// that count a Job that just finished.
func BenchmarkRequestsPerReconcile(b *testing.B) {
	start(b)
	c := &counter{n: map[string]int{}}
	_, stop := startManager(b, c)
	defer stop()
	const kind = infrav1.TerraformClusterKind
	const pokes = 20

	ns := namespace(b, "req")
	if err := k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: kind, Name: "c1"}}}); err != nil {
		b.Fatal(err)
	}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: infrav1.TerraformClusterSpec{TerraformSpec: infrav1.TerraformSpec{
			Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}, Variables: &runtime.RawExtension{Raw: []byte(`{"a":1}`)}}},
	}
	if err := k8s.Create(ctx, tc); err != nil {
		b.Fatal(err)
	}
	suffix := naming.StateSuffix(ns, kind, "c1")
	job := &batchv1.Job{}
	jobKey := client.ObjectKey{Namespace: ns, Name: naming.JobName(suffix, 1)}
	waitFor(b, "apply Job 1", func() bool { return k8s.Get(ctx, jobKey, job) == nil })

	measure := func(name string, act func()) row {
		quiesce(kind)
		c.reset()
		before := passes(kind)
		act()
		quiesce(kind)
		byKind, total := c.snapshot()
		return row{scenario: name, passes: passes(kind) - before, requests: total, byKind: byKind}
	}
	var rows []row
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows = append(rows, measure("Job running", func() {
			for p := 0; p < pokes; p++ {
				poke(b, tc, p)
			}
		}))
		rows = append(rows, measure("Job just finished", func() {
			finishJob(b, job, statetest.Cluster("10.0.0.1", 6443))
			waitFor(b, "provisioned", func() bool {
				fresh := &infrav1.TerraformCluster{}
				return k8s.Get(ctx, client.ObjectKeyFromObject(tc), fresh) == nil && fresh.Status.IsProvisioned()
			})
		}))
		rows = append(rows, measure("idle", func() {
			for p := 0; p < pokes; p++ {
				poke(b, tc, 100+p)
			}
		}))
		tm := provisionMachine(b, ns)
		quiesceMachine := func() { quiesce(infrav1.TerraformMachineKind) }
		quiesceMachine()
		c.reset()
		before := passes(infrav1.TerraformMachineKind)
		for p := 0; p < pokes; p++ {
			poke(b, tm, p)
		}
		quiesceMachine()
		byKind, total := c.snapshot()
		rows = append(rows, row{scenario: "idle machine", passes: passes(infrav1.TerraformMachineKind) - before, requests: total, byKind: byKind})
		break
	}
	b.StopTimer()
	fmt.Printf("\n%-18s %7s %9s %12s  %s\n", "scenario", "passes", "requests", "req/pass", "requests by verb and resource")
	for _, r := range rows {
		perPass := 0.0
		if r.passes > 0 {
			perPass = float64(r.requests) / r.passes
		}
		fmt.Printf("%-18s %7.0f %9d %12.2f  %s\n", r.scenario, r.passes, r.requests, perPass, format(r.byKind))
		b.ReportMetric(perPass, strings.ReplaceAll(r.scenario, " ", "-")+"-req/pass")
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

// provisionMachine creates a Machine with its bootstrap data and a TerraformMachine, and
// completes its apply.
func provisionMachine(b *testing.B, ns string) *infrav1.TerraformMachine {
	b.Helper()
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1"},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: "m1"}}}
	for _, o := range []client.Object{boot, m} {
		if err := k8s.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m1", UID: m.UID}}},
		Spec: infrav1.TerraformMachineSpec{TerraformSpec: infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}}},
	}
	if err := k8s.Create(ctx, tm); err != nil {
		b.Fatal(err)
	}
	suffix := naming.StateSuffix(ns, infrav1.TerraformMachineKind, "m1")
	job := &batchv1.Job{}
	waitFor(b, "machine apply Job", func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.JobName(suffix, 1)}, job) == nil
	})
	if err := statetest.Write(ctx, k8s, ns, suffix, statetest.Machine("tf://m1")); err != nil {
		b.Fatal(err)
	}
	pod, err := envtest.StartJob(ctx, k8s, job)
	if err != nil {
		b.Fatal(err)
	}
	if err := envtest.FinishJob(ctx, k8s, job, pod, true, ""); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "machine provisioned", func() bool {
		fresh := &infrav1.TerraformMachine{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(tm), fresh) == nil && fresh.Status.IsProvisioned()
	})
	return tm
}
