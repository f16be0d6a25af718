package runlease

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// maxNamedJobs is how many Jobs a wait message names.
const maxNamedJobs = 5

// Manager takes, judges and gives back the leases. It is safe for concurrent use.
type Manager struct {
	client client.Client
	live   client.Reader
	opts   Options
}

// New returns a Manager that writes Leases through c and makes every deciding read (Leases,
// Jobs, Pods) through live. Wire live to mgr.GetAPIReader(), never to the manager's cached
// client: a cache that trails the API server would see a free lease where a Job runs. opts
// should start from DefaultOptions; unset durations and the clock are defaulted.
func New(c client.Client, live client.Reader, opts Options) *Manager {
	return &Manager{client: c, live: live, opts: opts.withDefaults()}
}

// Options returns the options in force (defaults filled).
func (m *Manager) Options() Options { return m.opts }

// Acquire takes the leases the request's operation needs, in the gate's order, or reports a
// wait. It never retries: a conflict or a concurrent create means another writer won, and the
// result is a wait; the caller looks again after Wait.RequeueAfter.
//
//   - Every operation first takes the owner's run lease.
//   - With the gate on, a TerraformCluster's mutating operation then takes the cluster lease,
//     then lists (live) the live mutating run leases of the cluster's machines and pools; if
//     there are any it keeps both leases and waits (WaitingForMachineOperations).
//   - With the gate on, a machine's or pool's mutating operation then reads the cluster lease;
//     if it is live, the machine gives its run lease back and waits (WaitingForClusterOperation)
//     unless a Job of the holder's name already exists (then nothing new can start under that
//     name and giving back would hide it from the cluster). It gives back only a hold it took
//     itself: a hold it refreshed (the lease already named this Job) may be the one another
//     pass of the same run just confirmed, so it keeps it and waits. It also looks at the
//     cluster lease before taking its run lease, and waits without writing anything while it
//     is live.
//   - Plans, refreshes and drift checks, and every operation with the gate off, take the run
//     lease only.
func (m *Manager) Acquire(ctx context.Context, req Request) (Result, error) {
	if err := req.validate(m.opts.ClusterOperationGate); err != nil {
		return Result{}, fmt.Errorf("acquire leases: %w", err)
	}
	logger := log.FromContext(ctx).WithValues("holder", req.Holder, "operation", req.Operation)
	gated := m.opts.ClusterOperationGate && req.Operation.Mutating()
	if gated && !req.Owner.IsCluster() {
		// A look before the write: while the cluster's operation is live, a machine waits
		// without writing a hold at all, so a cluster scanning for machine operations never
		// trips over a hold that is about to be given back. Only an optimisation of the wait:
		// the exclusion itself comes from the write-then-read below.
		holder, live, err := m.clusterOperation(ctx, req.Owner)
		if err != nil {
			return Result{}, err
		}
		if live {
			return m.wait(req, infrav1.WaitingForClusterOperationReason, req.Owner.ClusterLeaseName(), []string{holder}), nil
		}
	}
	runName := req.Owner.RunLeaseName()
	run, err := m.take(ctx, req, runName, infrav1.LeaseKindRun, req.Owner)
	if err != nil {
		return Result{}, fmt.Errorf("take run lease %s/%s: %w", req.Owner.Namespace, runName, err)
	}
	if !run.taken {
		logger.V(1).Info("run lease held", "lease", runName, "by", run.holder)
		return m.wait(req, infrav1.WaitingForRunLeaseReason, runName, run.holderList()), nil
	}
	if !gated {
		return Result{Acquired: true}, nil
	}
	if req.Owner.IsCluster() {
		return m.gateCluster(ctx, req)
	}
	return m.gateMember(ctx, req, run)
}

// gateCluster: the cluster holds its run lease; take the cluster lease, then look for machine
// and pool operations in flight. Both holds are kept while it waits.
func (m *Manager) gateCluster(ctx context.Context, req Request) (Result, error) {
	name := req.Owner.ClusterLeaseName()
	cl, err := m.take(ctx, req, name, infrav1.LeaseKindCluster, req.Owner)
	if err != nil {
		return Result{}, fmt.Errorf("take cluster lease %s/%s: %w", req.Owner.Namespace, name, err)
	}
	if !cl.taken {
		// Another Job of this cluster holds the cluster lease; keep the run lease.
		return m.wait(req, infrav1.WaitingForClusterOperationReason, name, cl.holderList()), nil
	}
	busy, err := m.memberOperations(ctx, req.Owner)
	if err != nil {
		return Result{}, err
	}
	if len(busy) > 0 {
		log.FromContext(ctx).V(1).Info("cluster waits for machine operations", "jobs", busy)
		return m.wait(req, infrav1.WaitingForMachineOperationsReason, name, busy), nil
	}
	return Result{Acquired: true}, nil
}

// clusterOperation reads (live) the cluster lease of a machine's or pool's Cluster and reports
// its holder when it is live.
func (m *Manager) clusterOperation(ctx context.Context, member Owner) (string, bool, error) {
	name := member.ClusterLeaseName()
	var cl coordinationv1.Lease
	err := m.live.Get(ctx, types.NamespacedName{Namespace: member.Namespace, Name: name}, &cl)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read cluster lease %s/%s: %w", member.Namespace, name, err)
	}
	v, err := m.judge(ctx, &cl, clusterOwnerOf(&cl, member))
	if err != nil {
		return "", false, err
	}
	return holderOf(&cl), !v.Free, nil
}

// gateMember: the machine or pool holds its run lease (mine, as this pass wrote it); read the
// cluster lease.
func (m *Manager) gateMember(ctx context.Context, req Request, mine taken) (Result, error) {
	logger := log.FromContext(ctx)
	holder, live, err := m.clusterOperation(ctx, req.Owner)
	if err != nil || !live {
		return Result{Acquired: err == nil}, err
	}
	// Give the run lease back so the waiting cluster does not wait for an operation that never
	// starts, unless a Job of this name already exists: then its hold must stay visible to the
	// cluster, and the caller's create meets AlreadyExists and adopts that Job.
	exists, err := m.jobExists(ctx, req.Owner.Namespace, req.Holder)
	if err != nil {
		return Result{}, err
	}
	if exists {
		logger.Info("cluster operation in flight, but a Job of this name already exists: keeping the run lease", "job", req.Holder, "clusterLease", req.Owner.ClusterLeaseName())
		return Result{Acquired: true}, nil
	}
	// Give back only a hold this pass took (created, or took over from another holder). A hold
	// it refreshed was already this run's: another pass of the same run (a second manager) may
	// have confirmed it and be creating the Job right now, and deleting it would hide that Job
	// from the cluster (I5). Such a hold is kept while this pass waits: the cluster waits for it
	// until its Job ends, or, when no Job comes, until the grace runs out.
	if !mine.fresh {
		logger.Info("cluster operation in flight; keeping the run lease this pass refreshed, another pass of this run may be creating its Job", "job", req.Holder, "clusterLease", req.Owner.ClusterLeaseName())
		return m.wait(req, infrav1.WaitingForClusterOperationReason, req.Owner.ClusterLeaseName(), []string{holder}), nil
	}
	if _, err := m.deleteIfUnchanged(ctx, mine.lease); err != nil {
		// A failure to give back is only logged: the hold lapses after the grace.
		logger.Error(err, "give back run lease", "lease", mine.lease.Name)
	}
	return m.wait(req, infrav1.WaitingForClusterOperationReason, req.Owner.ClusterLeaseName(), []string{holder}), nil
}

// memberOperations lists (live) the run leases of the cluster's machines and pools taken for a
// mutating operation and still live; it returns their holders, sorted.
func (m *Manager) memberOperations(ctx context.Context, cluster Owner) ([]string, error) {
	var leases coordinationv1.LeaseList
	sel := client.MatchingLabels{
		infrav1.LeaseLabel:       infrav1.LeaseKindRun,
		infrav1.ManagedLabel:     "true",
		infrav1.ClusterNameLabel: naming.LabelValue(cluster.Cluster),
	}
	if err := m.live.List(ctx, &leases, client.InNamespace(cluster.Namespace), sel); err != nil {
		return nil, fmt.Errorf("list run leases of cluster %s/%s: %w", cluster.Namespace, cluster.Cluster, err)
	}
	var busy []string
	for i := range leases.Items {
		l := &leases.Items[i]
		kind := l.Labels[infrav1.OwnerKindLabel]
		if kind != infrav1.TerraformMachineKind && kind != infrav1.TerraformMachinePoolKind {
			continue
		}
		if !infrav1.Operation(l.Annotations[infrav1.LeaseOpAnnotation]).Mutating() {
			continue
		}
		owner := Owner{Namespace: l.Namespace, Kind: kind, Name: l.Labels[infrav1.OwnerNameLabel], Cluster: cluster.Cluster}
		v, err := m.judge(ctx, l, owner)
		if err != nil {
			return nil, err
		}
		if !v.Free {
			busy = append(busy, holderOf(l))
		}
	}
	sort.Strings(busy)
	return busy, nil
}

// clusterOwnerOf rebuilds the TerraformCluster that owns a cluster lease from its labels. The
// kind is fixed: a cluster lease labelled with another kind is backed by no Job of a cluster.
func clusterOwnerOf(l *coordinationv1.Lease, member Owner) Owner {
	return Owner{Namespace: l.Namespace, Kind: infrav1.TerraformClusterKind,
		Name: l.Labels[infrav1.OwnerNameLabel], Cluster: member.Cluster}
}

// taken is the outcome of one attempt at one lease.
type taken struct {
	taken bool
	// lease is the lease as written (taken) or as read (not taken; nil after a lost race).
	lease *coordinationv1.Lease
	// holder is the current holder when not taken ("" when a concurrent writer won).
	holder string
	// fresh: this attempt created the lease or took it over from another holder, rather than
	// refreshing a hold that already named the requested Job.
	fresh bool
}

func (t taken) holderList() []string {
	if t.holder == "" {
		return nil
	}
	return []string{t.holder}
}

// take makes one attempt at a lease: create it, or update it with the resourceVersion just
// read live when the holder is the requester (refresh) or the lease is free (takeover).
func (m *Manager) take(ctx context.Context, req Request, name, kind string, owner Owner) (taken, error) {
	now := m.opts.Clock.Now()
	var cur coordinationv1.Lease
	err := m.live.Get(ctx, types.NamespacedName{Namespace: req.Owner.Namespace, Name: name}, &cur)
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: req.Owner.Namespace, Name: name}}
		m.stamp(l, req, kind, now, true)
		if err := m.client.Create(ctx, l); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return taken{}, nil // a concurrent create won
			}
			return taken{}, fmt.Errorf("create lease: %w", err)
		}
		return taken{taken: true, lease: l, fresh: true}, nil
	}
	if err != nil {
		return taken{}, fmt.Errorf("read lease: %w", err)
	}
	holder := holderOf(&cur)
	if holder != req.Holder {
		v, err := m.judge(ctx, &cur, owner)
		if err != nil {
			return taken{}, err
		}
		if !v.Free {
			return taken{lease: &cur, holder: holder}, nil
		}
		log.FromContext(ctx).V(1).Info("taking over free lease", "lease", name, "from", holder, "rule", v.Reason)
	}
	m.stamp(&cur, req, kind, now, holder != req.Holder)
	if err := m.client.Update(ctx, &cur); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return taken{}, nil // another writer changed or removed it since the read
		}
		return taken{}, fmt.Errorf("update lease: %w", err)
	}
	return taken{taken: true, lease: &cur, fresh: holder != req.Holder}, nil
}

// stamp writes the request's hold into l: labels, annotations, holder, times, backstop. A
// refresh (the same holder) keeps a mutating operation the lease already names.
func (m *Manager) stamp(l *coordinationv1.Lease, req Request, kind string, now time.Time, newHolder bool) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	// Leases are read live, never cached: they need no shard label.
	for k, v := range naming.OwnerLabels(req.Owner.Kind, req.Owner.Name, req.Owner.Cluster, "") {
		l.Labels[k] = v
	}
	l.Labels[infrav1.LeaseLabel] = kind
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	op := req.Operation
	if prev := infrav1.Operation(l.Annotations[infrav1.LeaseOpAnnotation]); !newHolder && prev.Mutating() && !op.Mutating() {
		// Two passes name the same run with different operations (one of them on a stale view):
		// only one Job of that name can be created, and it may be the mutating one. A refresh
		// never hides a mutating hold from the cluster's scan of member operations (I5).
		op = prev
	}
	l.Annotations[infrav1.LeaseOpAnnotation] = string(op)
	l.Annotations[infrav1.LeaseAcquiredAtAnnotation] = now.UTC().Format(time.RFC3339)
	at := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = ptr.To(req.Holder)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.opts.Backstop(req.ActiveDeadlineSeconds) / time.Second))
	l.Spec.RenewTime = &at
	if newHolder || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &at
		if l.ResourceVersion != "" {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		}
	}
}

// wait builds a wait result.
func (m *Manager) wait(req Request, reason, lease string, jobs []string) Result {
	named := jobs
	if len(named) > maxNamedJobs {
		named = named[:maxNamedJobs]
	}
	var msg string
	switch reason {
	case infrav1.WaitingForMachineOperationsReason:
		msg = fmt.Sprintf("%s waits for %d mutating Job(s) of the cluster's machines and pools: %s; it holds cluster lease %s meanwhile",
			req.Operation, len(jobs), joinJobs(named, len(jobs)), lease)
	case infrav1.WaitingForClusterOperationReason:
		msg = fmt.Sprintf("%s waits for the cluster operation of Job %s (cluster lease %s)", req.Operation, joinJobs(named, len(jobs)), lease)
	default:
		msg = fmt.Sprintf("%s waits for Job %s, holder of run lease %s", req.Operation, joinJobs(named, len(jobs)), lease)
	}
	return Result{Wait: &Wait{
		Condition:    req.Operation.Condition(),
		Reason:       reason,
		Message:      msg,
		Lease:        lease,
		Jobs:         named,
		RequeueAfter: m.opts.RequeueAfter,
	}}
}

func joinJobs(named []string, total int) string {
	if len(named) == 0 {
		return "<taken concurrently by another writer>"
	}
	s := strings.Join(named, ", ")
	if total > len(named) {
		s += fmt.Sprintf(" and %d more", total-len(named))
	}
	return s
}

// judge is Judge without the Job.
func (m *Manager) judge(ctx context.Context, l *coordinationv1.Lease, owner Owner) (Verdict, error) {
	v, _, err := m.Judge(ctx, l, owner)
	return v, err
}

// Judge assesses any run or cluster lease the way Acquire does: Assess with live reads of the
// holder Job and, when they can change the verdict, of the holder's pods. owner is the object
// the lease belongs to (for a cluster lease, its TerraformCluster). It returns the holder Job as
// read (nil when absent, or not read because the lease has no holder).
// Callers that judge a lease they did not read by name (an admission request for a Lease, for
// example) use it rather than repeating the reads.
func (m *Manager) Judge(ctx context.Context, l *coordinationv1.Lease, owner Owner) (Verdict, *batchv1.Job, error) {
	j, err := m.judgeRead(ctx, l, owner, nil, false)
	return j.verdict, j.job, err
}

// judgement is one lease judged, with what was read to judge it.
type judgement struct {
	verdict Verdict
	job     *batchv1.Job
	// pods are the holder's pods, when they were listed (podsListed).
	pods       []corev1.Pod
	podsListed bool
}

// judgeRead is Judge with the holder Job already read when jobRead (job may be nil: the API
// server has none). The holder Job is read whenever the lease names one, even past the
// leaseDurationSeconds it carries: that duration is trusted only down to the floor the Job's
// own deadline gives (BackstopFloor).
func (m *Manager) judgeRead(ctx context.Context, l *coordinationv1.Lease, owner Owner, job *batchv1.Job, jobRead bool) (judgement, error) {
	now := m.opts.Clock.Now()
	holder := holderOf(l)
	if holder == "" {
		return judgement{verdict: Assess(l, owner, nil, nil, now, m.opts)}, nil
	}
	if !jobRead {
		var err error
		if job, err = m.getJob(ctx, l.Namespace, holder); err != nil {
			return judgement{}, err
		}
	}
	v := Assess(l, owner, job, nil, now, m.opts)
	if !v.needPods {
		return judgement{verdict: v, job: job}, nil
	}
	pods, err := jobstatus.ListPodsOf(ctx, m.live, l.Namespace, holder, job)
	if err != nil {
		return judgement{}, err
	}
	return judgement{verdict: Assess(l, owner, job, pods, now, m.opts), job: job, pods: pods, podsListed: true}, nil
}

// getJob reads a Job live; nil when the API server has none.
func (m *Manager) getJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return jobstatus.GetJob(ctx, m.live, namespace, name)
}

func (m *Manager) jobExists(ctx context.Context, namespace, name string) (bool, error) {
	j, err := m.getJob(ctx, namespace, name)
	return j != nil, err
}
