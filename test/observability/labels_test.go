package observability

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/cachelag"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/test/objects"

	// The admission webhooks: imported so that a series they register is gathered too.
	_ "github.com/captf/cluster-api-provider-terraform/webhooks"
)

// allowedLabels is the bounded set of label names a CAPTF series may carry. Each takes values
// from a fixed set (docs/observability.md lists them); le and quantile are Prometheus's own.
// Object names, namespaces, Job names and users are never labels.
var allowedLabels = map[string]bool{
	"kind": true, "operation": true, "outcome": true, "action": true, "reason": true, "check": true,
	"guard": true, "ready_reason": true, "le": true, "quantile": true,
}

// sample values for each label, to create one child of every vector.
var sampleValues = map[string]string{
	"kind": infrav1.TerraformClusterKind, "operation": string(infrav1.OperationApply), "outcome": string(infrav1.RunFailed),
	"action": "Start", "reason": infrav1.WaitingForRunLeaseReason, "check": "activeJob", "guard": "object",
}

var variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// touch creates one child of a vector (or observes a plain histogram) so that Gather reports
// the family. The labels come from the collector's own description.
func touch(t *testing.T, c prometheus.Collector) {
	t.Helper()
	ch := make(chan *prometheus.Desc, 4)
	c.Describe(ch)
	close(ch)
	for d := range ch {
		var values []string
		if m := variableLabels.FindStringSubmatch(d.String()); m != nil && m[1] != "" {
			for _, l := range strings.Split(m[1], ",") {
				v, ok := sampleValues[strings.TrimSpace(l)]
				if !ok {
					v = "x"
				}
				values = append(values, v)
			}
		}
		switch v := c.(type) {
		case *prometheus.CounterVec:
			v.WithLabelValues(values...).Add(0)
		case *prometheus.GaugeVec:
			v.WithLabelValues(values...).Add(0)
		case *prometheus.HistogramVec:
			v.WithLabelValues(values...).Observe(0)
		case *prometheus.SummaryVec:
			v.WithLabelValues(values...).Observe(0)
		case prometheus.Histogram:
			v.Observe(0)
		case prometheus.Gauge: // before Counter: a Gauge has Counter's methods too
			v.Add(0)
		case prometheus.Counter:
			v.Add(0)
		default:
			t.Fatalf("cannot touch %T (%s)", c, d)
		}
	}
}

// gatherCAPTF touches every exported series of controllers/metrics and the cache-lag counter,
// registers the objects collector over a fake cache holding one object of each kind, and
// returns the CAPTF families of controller-runtime's registry, by name.
func gatherCAPTF(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	for _, c := range []prometheus.Collector{metrics.JobsStarted, metrics.JobsFinished, metrics.JobDuration,
		metrics.LeaseWaits, metrics.Decisions, metrics.StateSize, metrics.BackupsTaken, metrics.LocksBroken,
		metrics.DriftDetected, metrics.GuardDecisions, metrics.GuardDuration} {
		touch(t, c)
	}
	cachelag.Detected() // reads (and so creates) the children of captf_cache_lag_total

	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ready := metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.StateLostReason}
	cluster := objects.Cluster("ns", "c").With(func(c *infrav1.TerraformCluster) {
		c.Status.Conditions = []metav1.Condition{ready}
		c.Status.PendingPlan = &infrav1.PendingPlan{ID: "p"}
	}).Obj()
	machine := objects.Machine("ns", "m").Obj()
	pool := objects.MachinePool("ns", "p").Obj()
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster, machine, pool).WithStatusSubresource(cluster).Build()
	if err := crmetrics.Registry.Register(&metrics.Objects{Cache: cache}); err != nil {
		if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
			t.Fatal(err)
		}
	}

	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "captf_") {
			out[f.GetName()] = f
		}
	}
	return out
}

// labelNames lists the label names of a family's samples (a histogram's le is not a label of
// the family in the exposition model; it belongs to its buckets).
func labelNames(f *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			seen[l.GetName()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestEverySeriesCarriesOnlyBoundedLabels lists the label names of every CAPTF series
// gathered from the manager's registry and fails on any label outside allowedLabels. It also
// checks that what it gathered is every series the source declares, so a new series cannot
// escape it.
func TestEverySeriesCarriesOnlyBoundedLabels(t *testing.T) {
	gathered := gatherCAPTF(t)
	declared := captfSeries(t)
	names := make([]string, 0, len(gathered))
	for n := range gathered {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		labels := labelNames(gathered[n])
		t.Logf("%-36s %-10s %s", n, strings.ToLower(gathered[n].GetType().String()), fmtLabels(labels))
		for _, l := range labels {
			if !allowedLabels[l] {
				t.Errorf("%s carries the label %q, which is not in the bounded set %v", n, l, sortedKeys(allowedLabels))
			}
		}
		d, ok := declared[n]
		if !ok {
			t.Errorf("%s is registered but no declaration in %v was found", n, captfDirs)
			continue
		}
		want := slices.Clone(d.Labels)
		sort.Strings(want)
		if !slices.Equal(labels, want) {
			t.Errorf("%s: gathered labels %v, declared %v (%s)", n, labels, want, d.Where)
		}
	}
	for n, d := range declared {
		if _, ok := gathered[n]; !ok {
			t.Errorf("%s (%s) is declared but was not gathered: register it and touch it in gatherCAPTF", n, d.Where)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestObjectsGaugeCountsReadyReasonsFromTheCache checks the collector-computed gauges on the
// fake cache of gatherCAPTF: one object per kind, the cluster StateLost with a pending plan.
func TestObjectsGaugeCountsReadyReasonsFromTheCache(t *testing.T) {
	gathered := gatherCAPTF(t)
	got := map[string]float64{}
	for _, m := range gathered["captf_objects"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		got[l["kind"]+"/"+l["ready_reason"]] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"TerraformCluster/StateLost": 1, "TerraformMachine/Unknown": 1, "TerraformMachinePool/Unknown": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("captf_objects{%s} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	plans := map[string]float64{}
	for _, m := range gathered["captf_plans_awaiting_approval"].GetMetric() {
		plans[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if plans["TerraformCluster"] != 1 || plans["TerraformMachine"] != 0 || len(plans) != 3 {
		t.Errorf("captf_plans_awaiting_approval: %v, want 1 for TerraformCluster and 0 for the two other kinds", plans)
	}
}
