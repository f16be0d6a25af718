package runlease

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// MinActiveDeadlineSeconds is the shortest Job deadline the API accepts
// (spec.job.activeDeadlineSeconds has a minimum of 60): the backstop of a lease whose holder
// Job is unknown is never trusted below Backstop(MinActiveDeadlineSeconds), 960 s by default.
const MinActiveDeadlineSeconds int64 = 60

// Owner identifies the reconciled object a lease belongs to.
type Owner struct {
	// Namespace of the object; its leases, Jobs and pods live there too.
	Namespace string
	// Kind is infrav1.TerraformClusterKind, TerraformMachineKind or TerraformMachinePoolKind.
	Kind string
	// Name of the object. For an owner rebuilt from a lease's labels it may be the shortened
	// label value (naming.LabelValue), which naming.OwnedBy still matches.
	Name string
	// Cluster is the name of the owning Cluster API Cluster; it keys the cluster lease and
	// scopes the gate. Required for mutating operations while the gate is on.
	Cluster string
}

// Suffix is the object's state suffix, which names its run lease and its Jobs.
func (o Owner) Suffix() string { return naming.StateSuffix(o.Namespace, o.Kind, o.Name) }

// RunLeaseName is the name of the object's run lease.
func (o Owner) RunLeaseName() string { return naming.RunLeaseName(o.Suffix()) }

// ClusterLeaseName is the name of the cluster lease of the object's Cluster.
func (o Owner) ClusterLeaseName() string { return naming.ClusterLeaseName(o.Namespace, o.Cluster) }

// IsCluster reports whether the owner is a TerraformCluster.
func (o Owner) IsCluster() bool { return o.Kind == infrav1.TerraformClusterKind }

func (o Owner) validate() error {
	if o.Namespace == "" || o.Name == "" {
		return errors.New("owner needs a namespace and a name")
	}
	switch o.Kind {
	case infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind:
		return nil
	}
	return fmt.Errorf("owner kind %q is not a reconciled kind", o.Kind)
}

// Request asks for the leases a Job needs before it is created.
type Request struct {
	// Owner is the object that will run the Job.
	Owner Owner
	// Holder is the name of the Job about to be created (naming.JobName(suffix, seq)). It does
	// not change while the object waits, so a later pass refreshes its own hold.
	Holder string
	// Operation the Job runs; Mutating operations go through the gate.
	Operation infrav1.Operation
	// ActiveDeadlineSeconds of the Job; zero means infrav1.DefaultActiveDeadlineSeconds. It
	// sets the lease's backstop (leaseDurationSeconds).
	ActiveDeadlineSeconds int64
}

func (r Request) validate(gate bool) error {
	if err := r.Owner.validate(); err != nil {
		return err
	}
	if r.Holder == "" {
		return errors.New("request needs a holder (the Job name)")
	}
	switch r.Operation {
	case infrav1.OperationApply, infrav1.OperationDestroy, infrav1.OperationPlan,
		infrav1.OperationRefresh, infrav1.OperationDrift, infrav1.OperationRestore:
	default:
		return fmt.Errorf("unknown operation %q", r.Operation)
	}
	if r.ActiveDeadlineSeconds < 0 {
		return fmt.Errorf("negative activeDeadlineSeconds %d", r.ActiveDeadlineSeconds)
	}
	if gate && r.Operation.Mutating() && r.Owner.Cluster == "" {
		return fmt.Errorf("%s of %s %s/%s needs the owner's cluster name for the operation gate",
			r.Operation, r.Owner.Kind, r.Owner.Namespace, r.Owner.Name)
	}
	return nil
}

// Result is the outcome of Acquire: either every lease the operation needs is held by the
// holder (Acquired), or the operation waits (Wait is set). A wait is never a failure.
type Result struct {
	Acquired bool
	Wait     *Wait
}

// Wait says what an operation waits for, with what the reconciler needs to report it: set
// Condition to Unknown with Reason and Message, requeue after RequeueAfter, create no Job, count
// nothing toward backoff, and emit one Normal event when the wait begins (see Repeats).
type Wait struct {
	// Condition is the condition of the operation's family (ConditionFor).
	Condition string
	// Reason is WaitingForRunLease, WaitingForClusterOperation or WaitingForMachineOperations.
	Reason string
	// Message names the Jobs waited for and the lease. It is deterministic (sorted names, no
	// times), so it changes only when the set of Jobs waited for changes.
	Message string
	// Lease is the name of the lease the wait is about.
	Lease string
	// Jobs are the holders waited for, sorted, at most five; empty when the lease was taken by
	// a concurrent writer whose name this call did not read.
	Jobs []string
	// RequeueAfter is when to look again (Options.RequeueAfter).
	RequeueAfter time.Duration
}

// Repeats reports whether the object's current condition of the wait's type already reports
// this wait (same type, Unknown, same reason). The wait is then a continuation: the caller may
// refresh the message but emits no new event. The reason, not the message, identifies a wait,
// because the message follows the Jobs in flight while the wait itself goes on.
func (w *Wait) Repeats(current *metav1.Condition) bool {
	return w != nil && current != nil && current.Type == w.Condition &&
		current.Status == metav1.ConditionUnknown && current.Reason == w.Reason
}

// Options tune the rules. Start from DefaultOptions: the zero value turns the gate off.
type Options struct {
	// Grace is how long a lease whose holder Job is not on the API server stays live: it covers
	// a manager that crashed between taking the lease and creating the Job, and a reader racing
	// that create. Default 1 minute.
	Grace time.Duration
	// TerminationGrace is the Job pod's termination grace period, part of the backstop.
	// Default: the grace the Job builder gives every pod (jobs.TerminationGracePeriodSeconds, 600 s).
	TerminationGrace time.Duration
	// BackstopMargin is added on top of the deadline and the termination grace. Default 5 min.
	BackstopMargin time.Duration
	// ClusterOperationGate makes the mutating operations of a TerraformCluster and of its
	// machines and pools exclude each other. Default true (DefaultOptions, and the manager flag
	// --cluster-operation-gate); a zero Options has it false, so callers start from
	// DefaultOptions.
	ClusterOperationGate bool
	// RequeueAfter is how soon a waiting operation looks again; it must stay below Grace so a
	// waiting cluster refreshes its holds before they lapse. Default 30 s.
	RequeueAfter time.Duration
	// Clock gives the time every rule uses. Default the real clock; tests inject a fake one.
	Clock clock.PassiveClock
}

// DefaultOptions returns the defaults: grace 1 min, termination grace 600 s, backstop margin
// 5 min, the gate on, requeue after 30 s, the real clock.
func DefaultOptions() Options {
	return Options{
		Grace:                time.Minute,
		TerminationGrace:     time.Duration(jobs.TerminationGracePeriodSeconds) * time.Second,
		BackstopMargin:       5 * time.Minute,
		ClusterOperationGate: true,
		RequeueAfter:         30 * time.Second,
		Clock:                clock.RealClock{},
	}
}

// withDefaults fills unset durations and the clock; it cannot default the gate (a bool).
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Grace <= 0 {
		o.Grace = d.Grace
	}
	if o.TerminationGrace <= 0 {
		o.TerminationGrace = d.TerminationGrace
	}
	if o.BackstopMargin <= 0 {
		o.BackstopMargin = d.BackstopMargin
	}
	if o.RequeueAfter <= 0 {
		o.RequeueAfter = d.RequeueAfter
	}
	if o.Clock == nil {
		o.Clock = d.Clock
	}
	return o
}

// Backstop is the age past which a lease is free whatever its holder: the Job's
// activeDeadlineSeconds (zero means infrav1.DefaultActiveDeadlineSeconds, the deadline the Job
// builder gives a Job whose spec sets none) plus the termination grace plus the margin; 4500 s
// with the defaults.
func (o Options) Backstop(activeDeadlineSeconds int64) time.Duration {
	o = o.withDefaults()
	if activeDeadlineSeconds <= 0 {
		activeDeadlineSeconds = infrav1.DefaultActiveDeadlineSeconds
	}
	return time.Duration(activeDeadlineSeconds)*time.Second + o.TerminationGrace + o.BackstopMargin
}
