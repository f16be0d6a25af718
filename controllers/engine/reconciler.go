package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/cachelag"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// Annotations the engine keeps on reconciled objects (durable across clusterctl move).
const (
	// AppliedHashAnnotation is the inputs hash of the last successful apply.
	AppliedHashAnnotation = "captf.io/applied-hash"
	// DestroyedAnnotation is set once a destroy Job succeeded.
	DestroyedAnnotation = "captf.io/destroyed"
	// FailuresAnnotation counts consecutive failed Jobs (drives the backoff).
	FailuresAnnotation = "captf.io/failures"
	// RetryAtAnnotation is when a failed operation may run again (RFC 3339).
	RetryAtAnnotation = "captf.io/retry-at"
	// LastErrorAnnotation keeps the last failed Job's redacted message (at most 1 KiB), so the
	// backoff condition can say why even when a status patch was lost.
	LastErrorAnnotation = "captf.io/last-error"
)

// Backoff after a failed Job: 1 minute, doubling, at most 10 minutes.
const (
	BackoffBase = time.Minute
	BackoffMax  = 10 * time.Minute
)

// Reconciler runs the shared pass for one kind.
type Reconciler struct {
	// Client reads watched types from the cache and writes to the API server.
	Client client.Client
	// APIReader reads through the API server (mgr.GetAPIReader()).
	APIReader client.Reader
	Kind      Kind
	Leases    *runlease.Manager
	Recorder  events.EventRecorder
	Clock     clock.Clock
	// Jobs carries the images and the default service account of the Jobs.
	Jobs jobs.Defaults
	// ManageRunnerRBAC creates the runner ServiceAccount, Role and RoleBinding in namespaces
	// with CAPTF objects. Default true in the manager.
	ManageRunnerRBAC bool
	// InputsTTL is how long an inputs hash is reused while nothing the fingerprint covers
	// changed. Sources the fingerprint cannot see (variablesFrom Secrets and ConfigMaps, the
	// bootstrap data's content) are read again at the latest after it. Default 10 minutes.
	InputsTTL time.Duration

	memo inputsMemo
}

func (r *Reconciler) inputsTTL() time.Duration {
	if r.InputsTTL > 0 {
		return r.InputsTTL
	}
	return 10 * time.Minute
}

// pass is the state of one reconcile of one object.
type pass struct {
	r       *Reconciler
	obj     Object
	before  Object
	owner   runlease.Owner
	suffix  string
	cluster *clusterv1.Cluster
	jobs    []batchv1.Job
	ev      Evidence
	result  ctrl.Result
}

// Reconcile runs one pass. Errors are returned to controller-runtime, which requeues with its
// rate limiter; waits return a RequeueAfter.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	logger := log.FromContext(ctx).WithValues("kind", r.Kind.Name())
	ctx = log.IntoContext(ctx, logger)

	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", req.NamespacedName, err)
	}
	p := &pass{r: r, obj: obj, before: obj.DeepCopyObject().(Object)}
	p.suffix = naming.StateSuffix(obj.GetNamespace(), r.Kind.Name(), obj.GetName())
	p.owner = runlease.Owner{Namespace: obj.GetNamespace(), Kind: r.Kind.Name(), Name: obj.GetName(),
		Cluster: obj.GetLabels()[clusterv1.ClusterNameLabel]}

	// One status patch per pass, whatever path the pass took.
	defer func() {
		if err := p.patchStatus(ctx); err != nil && retErr == nil {
			retErr = err
		}
		if p.result.RequeueAfter > 0 && (res.RequeueAfter == 0 || p.result.RequeueAfter < res.RequeueAfter) && !res.Requeue {
			res.RequeueAfter = p.result.RequeueAfter
		}
	}()
	return p.run(ctx)
}

func (p *pass) run(ctx context.Context) (ctrl.Result, error) {
	r, obj := p.r, p.obj
	deleting := !obj.GetDeletionTimestamp().IsZero()

	// Preamble: the finalizer protects the state from the first moment.
	if !deleting && !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		if err := p.patchMeta(ctx, func(o Object) { controllerutil.AddFinalizer(o, infrav1.Finalizer) }); err != nil {
			return p.conflictOr(ctx, err, "add finalizer")
		}
	}
	if deleting && !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
		return ctrl.Result{}, nil
	}

	if err := p.gather(ctx); err != nil {
		return ctrl.Result{}, err
	}
	p.setPausedCondition()

	// Bookkeep the finished Job of the current run sequence once.
	if cur := p.ev.Current; cur != nil && cur.Phase == JobFinished {
		done, err := p.bookkeep(ctx)
		if err != nil || !done {
			return p.result, err
		}
		// The metadata patch of the bookkeeping triggers the next pass.
		return ctrl.Result{Requeue: true}, nil
	}

	if len(p.ev.Running) > 0 {
		return p.keepRunning(ctx)
	}

	if NeedsLagCheck(p.ev) {
		verdict, err := cachelag.Check(ctx, cachelag.Input{
			APIReader: r.APIReader, Leases: r.Leases, Owner: p.owner,
			ActiveJob: p.ev.ActiveJob, Cached: p.jobs,
		})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("cache lag check: %w", err)
		}
		p.ev.LagChecked, p.ev.Lag = true, verdict.Lag
		if verdict.Lag {
			log.FromContext(ctx).Info("cache lag: a Job exists on the API server but not in the cache; waiting", "job", verdict.Job, "why", verdict.Reason)
			return ctrl.Result{RequeueAfter: LagRequeue}, nil
		}
	}

	if err := p.gatherDecisionInputs(ctx, deleting); err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(p.ev)
	return p.act(ctx, d)
}

// gather reads the evidence every pass needs: the Cluster, pause, and the object's Jobs, all
// from the cache.
func (p *pass) gather(ctx context.Context) error {
	obj := p.obj
	now := p.r.Clock.Now()
	ann := obj.GetAnnotations()
	p.ev = Evidence{
		Now:          now,
		Deleting:     !obj.GetDeletionTimestamp().IsZero(),
		HasFinalizer: controllerutil.ContainsFinalizer(obj, infrav1.Finalizer),
		MoveDeletion: hasKey(ann, infrav1.DeleteForMoveAnnotation),
		BlockMove:    hasKey(ann, infrav1.BlockMoveAnnotation),
		RunSeq:       runSeq(obj),
		AppliedHash:  ann[AppliedHashAnnotation],
		Destroyed:    ann[DestroyedAnnotation] == "true",
	}
	if st := obj.GetTerraformStatus(); st.ActiveJob != nil {
		p.ev.ActiveJob = st.ActiveJob.Name
	}
	if t, err := time.Parse(time.RFC3339, ann[RetryAtAnnotation]); err == nil {
		p.ev.RetryAt = t
		p.ev.LastError = ann[LastErrorAnnotation]
	}

	if name := p.owner.Cluster; name != "" {
		c := &clusterv1.Cluster{}
		err := p.r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, c)
		switch {
		case err == nil:
			p.cluster = c
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get cluster %s: %w", name, err)
		}
	}
	p.ev.Paused = hasKey(ann, infrav1.PausedAnnotation) || (p.cluster != nil && p.cluster.Spec.Paused != nil && *p.cluster.Spec.Paused)

	list := &batchv1.JobList{}
	if err := p.r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{
		infrav1.ManagedLabel: "true", infrav1.OwnerKindLabel: p.r.Kind.Name(), infrav1.OwnerNameLabel: naming.LabelValue(obj.GetName()),
	}); err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	p.jobs = list.Items
	sort.Slice(p.jobs, func(i, j int) bool { return p.jobs[i].Name < p.jobs[j].Name })
	for i := range p.jobs {
		j := &p.jobs[i]
		if !naming.OwnedBy(j.Labels, p.r.Kind.Name(), obj.GetName()) {
			continue
		}
		seq, err := naming.ParseJobSeq(p.suffix, j.Name)
		if err != nil {
			continue // a Job of an object with a colliding label value: not ours
		}
		v := JobView{Name: j.Name, Seq: seq, Operation: infrav1.Operation(j.Labels[infrav1.OperationLabel]),
			InputsHash: j.Annotations[infrav1.InputsHashAnnotation], Phase: JobRunning}
		if jobs.Finished(j) {
			v.Phase = JobFinished
		}
		if seq == p.ev.RunSeq {
			vc := v
			p.ev.Current = &vc
		}
		if v.Phase == JobRunning {
			p.ev.Running = append(p.ev.Running, v)
		}
	}
	return nil
}

// gatherDecisionInputs reads what Decide needs beyond the cache: dependencies and inputs for
// a live object, children and state for a deleting one.
func (p *pass) gatherDecisionInputs(ctx context.Context, deleting bool) error {
	env := Env{Cache: p.r.Client, Live: p.r.APIReader, ClusterName: p.owner.Cluster}
	if deleting {
		if p.ev.MoveDeletion || p.ev.Paused {
			return nil
		}
		children, err := p.r.Kind.Children(ctx, env, p.obj)
		if err != nil {
			return fmt.Errorf("list children: %w", err)
		}
		p.ev.Children = children
		exists, err := p.stateExists(ctx)
		if err != nil {
			return err
		}
		p.ev.StateExists = exists
		return nil
	}
	if p.ev.Paused {
		return nil
	}
	if p.owner.Cluster == "" || p.cluster == nil {
		p.ev.DependencyWait = &Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterReason,
			Message: "waiting for the owning Cluster: set the cluster.x-k8s.io/cluster-name label to an existing Cluster", RequeueAfter: time.Minute}
		return nil
	}
	fp, err := p.r.Kind.Fingerprint(ctx, env, p.obj)
	if err != nil {
		return fmt.Errorf("fingerprint inputs: %w", err)
	}
	key := memoKey{uid: p.obj.GetUID(), generation: p.obj.GetGeneration(), fingerprint: p.owner.Cluster + "|" + fp}
	if hash, ok := p.r.memo.get(key, p.ev.Now); ok {
		p.ev.DesiredHash = hash
		return nil
	}
	contract, wait, err := p.r.Kind.Contract(ctx, env, p.obj)
	if err != nil {
		return fmt.Errorf("gather contract inputs: %w", err)
	}
	if wait != nil {
		p.ev.DependencyWait = wait
		return nil
	}
	in, problem, err := p.assembleInputs(ctx, contract)
	if err != nil {
		return err
	}
	if problem != nil {
		p.ev.InputsProblem = problem
		return nil
	}
	p.ev.DesiredHash = in.Hash
	p.r.memo.put(key, in.Hash, p.ev.Now.Add(p.r.inputsTTL()))
	return nil
}

func (p *pass) keepRunning(ctx context.Context) (ctrl.Result, error) {
	run := p.ev.Running[0]
	if !p.ev.BlockMove {
		if err := p.patchMeta(ctx, func(o Object) { setAnnotation(o, infrav1.BlockMoveAnnotation, "") }); err != nil {
			return p.conflictOr(ctx, err, "restore block-move")
		}
	}
	st := p.obj.GetTerraformStatus()
	if st.ActiveJob == nil || st.ActiveJob.Name != run.Name {
		st.ActiveJob = &infrav1.ActiveJob{Name: run.Name, Operation: run.Operation, StartTime: jobStart(p.jobs, run.Name)}
	}
	p.setCondition(familyOf(run.Operation), metav1.ConditionUnknown, infrav1.JobRunningReason,
		fmt.Sprintf("Job %s runs %s", run.Name, run.Operation))
	return ctrl.Result{}, nil
}

func runSeq(obj Object) int64 {
	if v, err := strconv.ParseInt(obj.GetAnnotations()[infrav1.RunSeqAnnotation], 10, 64); err == nil && v > 0 {
		return v
	}
	return 1
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func setAnnotation(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

func removeAnnotation(o client.Object, k string) {
	a := o.GetAnnotations()
	delete(a, k)
	o.SetAnnotations(a)
}

func jobStart(list []batchv1.Job, name string) *metav1.Time {
	for i := range list {
		if list[i].Name == name {
			t := list[i].CreationTimestamp
			return &t
		}
	}
	return nil
}

// familyOf is the condition that reports an operation.
func familyOf(op infrav1.Operation) string {
	switch op {
	case infrav1.OperationRefresh, infrav1.OperationDrift:
		return infrav1.DriftJobSucceededCondition
	case infrav1.OperationRestore:
		return infrav1.RestoreJobSucceededCondition
	}
	return infrav1.ApplyJobSucceededCondition
}

func (p *pass) setCondition(t string, s metav1.ConditionStatus, reason, msg string) {
	st := p.obj.GetTerraformStatus()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: p.obj.GetGeneration()})
}
