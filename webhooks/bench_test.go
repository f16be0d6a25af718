package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// benchEnv is the benchmark's own control plane, started on first use and stopped by TestMain.
var benchEnv struct {
	cp      envtest.Shared
	env     *envtest.Env
	hooks   *hookServer
	admin   client.Client
	manager client.Client
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchEnv.hooks != nil {
		if err := benchEnv.hooks.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop webhook manager:", err)
		}
	}
	if err := benchEnv.cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func startBenchEnv(b *testing.B) {
	b.Helper()
	if benchEnv.env != nil {
		return
	}
	ctrl.SetLogger(logr.Discard())
	k, err := kubectlPath()
	if err != nil {
		b.Fatal(err)
	}
	r, err := renderConfig(k)
	if err != nil {
		b.Fatal(err)
	}
	if benchEnv.cp.Options, err = controlPlaneOptions(r); err != nil {
		b.Fatal(err)
	}
	benchEnv.env, benchEnv.admin = benchEnv.cp.Get(b)
	if benchEnv.manager, _, err = managerClient(benchEnv.env); err != nil {
		b.Fatal(err)
	}
	if benchEnv.hooks, err = startHookServer(benchEnv.env.Config, benchEnv.env, hookOptions{}); err != nil {
		b.Fatal(err)
	}
}

type percentiles struct {
	n, p50, p99 time.Duration
	// inGuard is the mean time the webhook server spent in the guard per request.
	inGuard time.Duration
}

func percentilesOf(d []time.Duration) percentiles {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return percentiles{n: time.Duration(len(s)), p50: at(0.50), p99: at(0.99)}
}

// BenchmarkGuard measures, through the real API server: the latency of a guarded removal the
// guard denies (a Job runs) and allows (nothing runs), against an update no webhook sees; a
// lease write by the manager (the lease guard lets it through on its identity alone) and by a
// user while the holder runs (denied); and how many webhook calls 1,000 unrelated updates cause
// (the matchConditions make it 0).
// Run: go test ./webhooks -run '^$' -bench BenchmarkGuard -benchtime=3s
func BenchmarkGuard(b *testing.B) {
	startBenchEnv(b)
	ctx := context.Background()
	c := benchEnv.admin
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	kind := infrav1.TerraformClusterKind
	for _, name := range []string{"running", "idle", "other"} {
		if err := c.Create(ctx, newObject(kind, ns, name)); err != nil {
			b.Fatal(err)
		}
		if err := ensureMark(ctx, c, kind, ns, name, markBlockMove, ""); err != nil {
			b.Fatal(err)
		}
	}
	r, err := startRun(ctx, c, kind, ns, "running", 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range allMarks {
		if err := ensureMark(ctx, c, kind, ns, "running", m, r.job.Name); err != nil {
			b.Fatal(err)
		}
	}
	done, err := startRun(ctx, c, kind, ns, "idle", 1)
	if err != nil {
		b.Fatal(err)
	}
	if err := done.finish(ctx, c); err != nil {
		b.Fatal(err)
	}
	patch := func(name, body string) error {
		return c.Patch(ctx, u(kind, ns, name), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	const dropBlockMove = `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`
	results := map[string]percentiles{}

	b.Run("guarded-removal-denied", func(b *testing.B) {
		var d []time.Duration
		s0, n0, _ := webhookTime(webhooks.GuardPath)
		for b.Loop() {
			t := time.Now()
			err := patch("running", dropBlockMove)
			d = append(d, time.Since(t))
			if !apierrors.IsForbidden(err) {
				b.Fatalf("want a denial, got %v", err)
			}
		}
		p := report(b, d)
		s1, n1, _ := webhookTime(webhooks.GuardPath)
		p.inGuard = meanSeconds(s1-s0, n1-n0)
		results["guarded removal, denied (Job runs)"] = p
	})
	b.Run("guarded-removal-allowed", func(b *testing.B) {
		var d []time.Duration
		s0, n0, _ := webhookTime(webhooks.GuardPath)
		for b.Loop() {
			t := time.Now()
			err := patch("idle", dropBlockMove)
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := ensureMark(ctx, c, kind, ns, "idle", markBlockMove, ""); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		p := report(b, d)
		s1, n1, _ := webhookTime(webhooks.GuardPath)
		p.inGuard = meanSeconds(s1-s0, n1-n0)
		results["guarded removal, allowed (nothing runs)"] = p
	})
	leasePatch := func(c client.Client, lease, note string) error {
		return c.Patch(ctx, objects.Lease(ns, lease).Obj(),
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"note":%q}}}`, note))))
	}
	b.Run("lease-write-by-the-manager", func(b *testing.B) {
		var d []time.Duration
		i := 0
		s0, n0, _ := webhookTime(webhooks.LeaseGuardPath)
		for b.Loop() {
			i++
			t := time.Now()
			err := leasePatch(benchEnv.manager, r.owner.RunLeaseName(), fmt.Sprintf("manager-%d", i))
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
		}
		p := report(b, d)
		s1, n1, _ := webhookTime(webhooks.LeaseGuardPath)
		p.inGuard = meanSeconds(s1-s0, n1-n0)
		results["lease write by the manager (Job runs)"] = p
	})
	b.Run("lease-write-denied", func(b *testing.B) {
		var d []time.Duration
		i := 0
		s0, n0, _ := webhookTime(webhooks.LeaseGuardPath)
		for b.Loop() {
			i++
			t := time.Now()
			err := leasePatch(c, r.owner.RunLeaseName(), fmt.Sprintf("user-%d", i))
			d = append(d, time.Since(t))
			if !apierrors.IsForbidden(err) {
				b.Fatalf("want a denial, got %v", err)
			}
		}
		p := report(b, d)
		s1, n1, _ := webhookTime(webhooks.LeaseGuardPath)
		p.inGuard = meanSeconds(s1-s0, n1-n0)
		results["lease write by a user, denied (Job runs)"] = p
	})
	b.Run("unrelated-update", func(b *testing.B) {
		var d []time.Duration
		i := 0
		for b.Loop() {
			i++
			t := time.Now()
			err := patch("running", fmt.Sprintf(`{"metadata":{"labels":{"seq":"%d"}}}`, i))
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
		}
		results["unrelated update (no webhook called)"] = report(b, d)
	})

	// What dominates an allowed removal: the guard must list the finished holder's pods, and a
	// consistent LIST of pods waits until the API server's watch cache has caught up with etcd,
	// which takes long when pods are rarely written (envtest runs no kubelet).
	b.Run("consistent-pod-list-after-a-write", func(b *testing.B) {
		var d []time.Duration
		i := 0
		for b.Loop() {
			i++
			b.StopTimer()
			if err := patch("other", fmt.Sprintf(`{"metadata":{"labels":{"w":"%d"}}}`, i)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			t := time.Now()
			err := c.List(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": done.job.Name})
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
		}
		results["a consistent LIST of pods after a write"] = report(b, d)
	})

	var guardCalls, allCalls float64
	b.Run("webhook-calls-per-1000-unrelated-updates", func(b *testing.B) {
		for b.Loop() {
			g0, _ := webhookCalls(webhooks.GuardPath)
			a0, _ := webhookCalls("")
			for i := range 1000 {
				var err error
				switch i % 4 {
				case 0: // a label on an object whose Job runs
					err = patch("running", fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, i))
				case 1: // an annotation, keeping block-move
					err = patch("running", fmt.Sprintf(`{"metadata":{"annotations":{"note":"%d","clusterctl.cluster.x-k8s.io/block-move":"%d"}}}`, i, i))
				case 2: // a condition on /status, keeping activeJob
					err = c.Status().Patch(ctx, u(kind, ns, "running"), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(
						`{"status":{"observedGeneration":%d}}`, i))))
				default: // another object's finalizers, keeping CAPTF's
					f := fmt.Sprintf(`{"metadata":{"finalizers":["%s","example.com/f%d"]}}`, infrav1.Finalizer, i)
					err = patch("other", f)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			g1, _ := webhookCalls(webhooks.GuardPath)
			a1, _ := webhookCalls("")
			guardCalls, allCalls = g1-g0, a1-a0
		}
		b.ReportMetric(guardCalls, "guard-calls/1000-updates")
		b.ReportMetric(allCalls, "webhook-calls/1000-updates")
	})

	base := results["unrelated update (no webhook called)"]
	fmt.Printf("\nGuard latency through the API server (envtest, %s, one run):\n", envDescription())
	fmt.Printf("%-42s %8s %10s %10s %12s %16s\n", "request", "samples", "p50", "p99", "p50 ratio", "mean in guard")
	for _, k := range []string{"unrelated update (no webhook called)", "guarded removal, allowed (nothing runs)", "guarded removal, denied (Job runs)",
		"lease write by the manager (Job runs)", "lease write by a user, denied (Job runs)", "a consistent LIST of pods after a write"} {
		p := results[k]
		in := "-"
		if p.inGuard > 0 {
			in = p.inGuard.Round(time.Microsecond).String()
		}
		fmt.Printf("%-42s %8d %10s %10s %11.2fx %16s\n", k, int(p.n), p.p50.Round(time.Microsecond), p.p99.Round(time.Microsecond),
			float64(p.p50)/float64(base.p50), in)
	}
	fmt.Printf("\nWebhook calls per 1,000 unrelated updates: guard %.0f, all CAPTF webhooks %.0f (target 0)\n\n", guardCalls, allCalls)
}

func report(b *testing.B, d []time.Duration) percentiles {
	p := percentilesOf(d)
	b.ReportMetric(float64(p.p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p.p99.Microseconds()), "p99-µs")
	return p
}

func meanSeconds(sum float64, n uint64) time.Duration {
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}

func envDescription() string {
	if benchEnv.env == nil {
		return "no control plane"
	}
	return benchEnv.env.Describe()
}
