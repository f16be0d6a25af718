package metrics

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The series, with their labels. docs/observability.md documents each.
var (
	// JobsStarted counts Jobs created (not adopted), by kind and operation.
	JobsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_jobs_started_total", Help: "Jobs CAPTF created, by kind and operation.",
	}, []string{"kind", "operation"})
	// JobsFinished counts Jobs counted by bookkeeping, by kind, operation and outcome.
	JobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_jobs_finished_total", Help: "Finished Jobs CAPTF counted, by kind, operation and outcome (Succeeded, Failed, Interrupted, Fenced).",
	}, []string{"kind", "operation", "outcome"})
	// JobDuration observes how long counted Jobs ran, by operation.
	JobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "captf_job_duration_seconds", Help: "How long finished Jobs ran, from start to completion, by operation.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"operation"})
	// LeaseWaits counts passes whose operation waited for a lease or a Job slot, by reason.
	LeaseWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_lease_waits_total", Help: "Passes whose Job waited for the run lease, the cluster lease or a Job slot, by reason.",
	}, []string{"reason"})
	// Decisions counts the decisions of reconcile passes, by kind, action and operation.
	Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_decisions_total", Help: "Decisions of reconcile passes, by kind, action and operation.",
	}, []string{"kind", "action", "operation"})
	// StateSize observes the compressed size of states read at bookkeeping.
	StateSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "captf_state_size_bytes", Help: "Compressed size of Terraform states backed up after a Job.",
		Buckets: prometheus.ExponentialBuckets(1024, 4, 8),
	})
	// BackupsTaken counts state backups taken, by kind.
	BackupsTaken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_state_backups_total", Help: "State backups taken after Jobs that moved the state serial, by kind.",
	}, []string{"kind"})
	// LocksBroken counts stale state locks the state channel broke (I8), by kind.
	LocksBroken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_state_locks_broken_total", Help: "Stale state locks broken by a Job's state channel, by kind.",
	}, []string{"kind"})
	// DriftDetected counts drift checks that found drift, by kind.
	DriftDetected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_drift_detected_total", Help: "Drift checks that found drift, by kind.",
	}, []string{"kind"})
	// ReplicaWrites counts the replications of a state version to the replica store, by kind
	// and the reason of the StateReplicated condition they set.
	ReplicaWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_state_replica_writes_total", Help: "Replications of the state a Job left to the replica store, by kind and reason (Replicated, or why the store did not take it).",
	}, []string{"kind", "reason"})
	// GuardDecisions counts the admission guards' verdicts, by guard and outcome.
	GuardDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_guard_decisions_total", Help: "Verdicts of the admission guards, by guard (object, lease, job) and outcome (allowed, denied, overridden, error).",
	}, []string{"guard", "outcome"})
	// GuardDuration observes how long a guard took to judge a request, by guard.
	GuardDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "captf_guard_duration_seconds", Help: "Time the admission guards took to judge a request, by guard.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"guard"})
)

// Guards and GuardOutcomes are the label values of the guard series.
var (
	Guards        = []string{"object", "lease", "job"}
	GuardOutcomes = []string{"allowed", "denied", "overridden", "error"}
)

// ReplicaReasons are the reason label values of ReplicaWrites.
var ReplicaReasons = []string{infrav1.StateReplicatedReason, infrav1.ReplicaUnavailableReason, infrav1.ReplicaConflictReason, infrav1.ReplicaKeyRefusedReason}

// ObserveReplication counts one replication of a state version (reason "": the store took it
// or held it already).
func ObserveReplication(kind, reason string) {
	if reason == "" {
		reason = infrav1.StateReplicatedReason
	}
	ReplicaWrites.WithLabelValues(kind, reason).Inc()
}

// kinds are the kind label values of the per-kind counters.
var kinds = []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind}

func init() {
	crmetrics.Registry.MustRegister(JobsStarted, JobsFinished, JobDuration, LeaseWaits, Decisions, StateSize,
		BackupsTaken, LocksBroken, DriftDetected, GuardDecisions, GuardDuration, ReplicaWrites)
	// The counters of rare events start at 0 for every label value, so increase() sees the
	// first event (a series that appears at 1 shows no increase) and an alert on it can fire.
	for _, k := range kinds {
		LocksBroken.WithLabelValues(k)
		DriftDetected.WithLabelValues(k)
		for _, r := range ReplicaReasons {
			ReplicaWrites.WithLabelValues(k, r)
		}
	}
	for _, g := range Guards {
		for _, o := range GuardOutcomes {
			GuardDecisions.WithLabelValues(g, o)
		}
	}
}

// objectsDesc and plansDesc describe the gauges computed from the cache at scrape time.
var (
	objectsDesc = prometheus.NewDesc("captf_objects", "Reconciled objects, by kind and the reason of their Ready condition.", []string{"kind", "ready_reason"}, nil)
	plansDesc   = prometheus.NewDesc("captf_plans_awaiting_approval", "Objects whose plan waits for approval, by kind.", []string{"kind"}, nil)
	behindDesc  = prometheus.NewDesc("captf_state_replica_behind", "Objects whose last state replication failed (StateReplicated False), by kind.", []string{"kind"}, nil)
)

// Objects is the collector of captf_objects, captf_plans_awaiting_approval and
// captf_state_replica_behind: it lists the
// three kinds from the manager's cache when scraped (no API request). A manager that is not
// the leader has no informers for them (its controllers have not started), so it reports
// neither series: the leader does.
type Objects struct {
	// Cache is the manager's cached reader.
	Cache client.Reader
	// Log receives listing errors; the zero value logs through controller-runtime's logger.
	Log logr.Logger
}

// Describe implements prometheus.Collector.
func (o *Objects) Describe(ch chan<- *prometheus.Desc) {
	ch <- objectsDesc
	ch <- plansDesc
	ch <- behindDesc
}

// Collect implements prometheus.Collector.
func (o *Objects) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	logger := o.Log
	if logger.GetSink() == nil {
		logger = log.FromContext(ctx)
	}
	for kind, list := range map[string]client.ObjectList{
		infrav1.TerraformClusterKind: &infrav1.TerraformClusterList{}, infrav1.TerraformMachineKind: &infrav1.TerraformMachineList{},
		infrav1.TerraformMachinePoolKind: &infrav1.TerraformMachinePoolList{},
	} {
		if err := o.Cache.List(ctx, list); err != nil {
			if errors.As(err, new(*cache.ErrResourceNotCached)) {
				// Not the leader (no informer): nothing to report, nothing wrong.
				continue
			}
			logger.Error(err, "collect objects gauge", "kind", kind)
			continue
		}
		reasons := map[string]float64{}
		plans, behind := 0.0, 0.0
		_ = meta.EachListItem(list, func(item runtime.Object) error {
			obj, ok := item.(interface {
				GetTerraformStatus() *infrav1.TerraformStatus
			})
			if !ok {
				return nil
			}
			st := obj.GetTerraformStatus()
			reason := "Unknown"
			if c := meta.FindStatusCondition(st.Conditions, infrav1.ReadyCondition); c != nil {
				reason = c.Reason
			}
			reasons[reason]++
			if st.PendingPlan != nil {
				plans++
			}
			if c := meta.FindStatusCondition(st.Conditions, infrav1.StateReplicatedCondition); c != nil && c.Status == metav1.ConditionFalse {
				behind++
			}
			return nil
		})
		for reason, n := range reasons {
			ch <- prometheus.MustNewConstMetric(objectsDesc, prometheus.GaugeValue, n, kind, reason)
		}
		ch <- prometheus.MustNewConstMetric(plansDesc, prometheus.GaugeValue, plans, kind)
		ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, behind, kind)
	}
}

// RegisterObjects registers the objects collector over the manager's cache.
func RegisterObjects(cache client.Reader) error {
	return crmetrics.Registry.Register(&Objects{Cache: cache})
}
