package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobslots"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Reconciler runs the shared pass for one kind.
type Reconciler struct {
	// Client reads watched types from the cache and writes to the API server.
	Client client.Client
	// APIReader reads through the API server (mgr.GetAPIReader()).
	APIReader client.Reader
	// SecretMeta reads the metadata of Secrets labelled captf.io/managed=true from the
	// manager's metadata informer (mgr.GetCache()): whether the state Secret is there, and the
	// state backups. Nil reads nothing (the state is then read live when it matters).
	SecretMeta client.Reader
	// BootstrapMeta is a metadata informer cache of the Secrets labelled
	// cluster.x-k8s.io/cluster-name (Cluster API's bootstrap contract labels bootstrap data so):
	// a bootstrap data Secret's resourceVersion tells whether its content changed, and its
	// events reach the machines and pools of its Cluster. Nil: the content is read live
	// whenever the inputs are assembled.
	BootstrapMeta cache.Cache
	// StateBackups is how many state backups to keep per object; 0 takes none.
	StateBackups int
	// StateReplica, when set, receives every state version a Job leaves (state.Keeper.Replicate);
	// nil keeps no replica.
	StateReplica *replica.Store
	// DriftInterval is the drift check interval of objects whose spec.drift.interval is unset
	// (manager flag --drift-interval); 0 turns their checks off.
	DriftInterval time.Duration
	// Started is when this manager started: drift checks that fell due before it are spread
	// over one interval (DriftDueAt). Zero means the first pass's time.
	Started time.Time
	// Slots bounds the Jobs the manager runs at once (nil: no bound).
	Slots    *jobslots.Slots
	Kind     Kind
	Leases   *runlease.Manager
	Recorder events.EventRecorder
	Clock    clock.Clock
	// Jobs carries the images of the Jobs. Each object's Jobs run as its own runner account
	// (naming.RunnerServiceAccountName) unless its spec names one.
	Jobs jobs.Defaults
	// Audiences judges the audience of spec.job.identityToken before every Job
	// (jobs.CheckIdentityAudience). Nil: a jobs.AudienceProbe through Client of the
	// ServiceAccount default/captf-audience-probe, created when missing.
	Audiences jobs.AudienceProber
	// IdentityNamespace is the manager's namespace, where the Secrets of TerraformIdentities
	// live (spec.job.identityRef). Empty: an object that references an identity runs no Job
	// (InputsValid=False, IdentityInvalid).
	IdentityNamespace string
	// InputsTTL is how long an inputs hash is reused while nothing the fingerprint covers
	// changed. Sources the fingerprint cannot see (variablesFrom Secrets and ConfigMaps, a
	// Secret outside the metadata caches) are read again at the latest after it. Default 10
	// minutes.
	InputsTTL time.Duration

	memo inputsMemo
	// replicatedRV holds, per object UID, the state Secret's resourceVersion the replica
	// store last received while a Job of the object runs (replicateWhileRunning).
	replicatedRV sync.Map
	startOnce    sync.Once
	keepOnce     sync.Once
	keeper       *state.Keeper
}

// stateKeeper is the keeper of the objects' states, built once from the Reconciler's clients.
func (r *Reconciler) stateKeeper() *state.Keeper {
	r.keepOnce.Do(func() {
		r.keeper = &state.Keeper{Client: r.Client, APIReader: r.APIReader, SecretMeta: r.SecretMeta, Backups: r.StateBackups, Clock: r.Clock,
			BackupTaken: func(kind string, bytes int) {
				metrics.BackupsTaken.WithLabelValues(kind).Inc()
				metrics.StateSize.Observe(float64(bytes))
			},
			Replica: r.StateReplica,
			ReplicaWritten: func(kind string, res *decide.ReplicaResult) {
				metrics.ObserveReplication(kind, res.Reason)
			}}
	})
	return r.keeper
}

// bootstrapMeta is BootstrapMeta as a reader (a nil interface when unset).
func (r *Reconciler) bootstrapMeta() client.Reader {
	if r.BootstrapMeta == nil {
		return nil
	}
	return r.BootstrapMeta
}

// started is when the manager started (the first pass's time when Started is unset).
func (r *Reconciler) started(now time.Time) time.Time {
	r.startOnce.Do(func() {
		if r.Started.IsZero() {
			r.Started = now
		}
	})
	return r.Started
}

func (r *Reconciler) inputsTTL() time.Duration {
	if r.InputsTTL > 0 {
		return r.InputsTTL
	}
	return 10 * time.Minute
}

// pass is the state of one reconcile of one object: what it read, what it decided, what it
// did, and the events waiting for the write they report.
type pass struct {
	r      *Reconciler
	obj    Object
	before Object
	owner  runlease.Owner
	suffix string
	// subject is the object as the state's keeper knows it.
	subject state.Subject
	// prep readies the Job a start creates.
	prep    *preparer
	cluster *clusterv1.Cluster
	jobs    []batchv1.Job
	// judged are the Jobs of jobs the decision sees (viewOf accepts them): the cache-lag
	// check reads every other Job live, even one the cache lists.
	judged []batchv1.Job
	pods   []corev1.Pod
	ev     decide.Evidence
	state  *state.State // the state as gatherState read it, when present
	d      decide.Decision
	rep    decide.Report
	out    outbox
	// policies are the plan policies that select the object (gatherPlanPolicies).
	policies policyGate
}

// Reconcile runs one pass: gather evidence, Decide, act, then one status patch. Errors are
// returned to controller-runtime, which requeues with its rate limiter; waits return a
// RequeueAfter. A result and an error are never returned together.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("kind", r.Kind.Name())
	ctx = log.IntoContext(ctx, logger)

	obj := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", req.NamespacedName, err)
	}
	if infrav1.ExternallyManaged(obj) {
		// Cluster API's contract: someone else manages this infrastructure cluster. No
		// finalizer, no Job, no status; the webhooks keep the mark off an object CAPTF manages.
		logger.V(1).Info("left alone: the infrastructure cluster is managed by someone else", "annotation", infrav1.ManagedByAnnotation)
		return ctrl.Result{}, nil
	}
	p := &pass{r: r, obj: obj, before: obj.DeepCopyObject().(Object)}
	p.suffix = naming.StateSuffix(obj.GetNamespace(), r.Kind.Name(), obj.GetName())
	p.owner = runlease.Owner{Namespace: obj.GetNamespace(), Kind: r.Kind.Name(), Name: obj.GetName(),
		Cluster: obj.GetLabels()[clusterv1.ClusterNameLabel]}
	p.out = outbox{rec: r.Recorder, about: obj}
	p.subject = state.Subject{Object: obj, Kind: r.Kind.Name(), Suffix: p.suffix, Cluster: p.owner.Cluster}
	p.prep = &preparer{c: r.Client, live: r.APIReader, obj: obj, subject: p.subject, identityNS: r.IdentityNamespace,
		audiences: r.audiences(), jobs: r.Jobs, out: &p.out}

	res, err := p.run(ctx)
	if p.d.Action == decide.ActionNone {
		return ctrl.Result{}, err
	}
	// One status patch per pass, whatever path the pass took.
	statusRes, serr := p.patchStatus(ctx, err == nil)
	if err == nil {
		err = serr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return earliest(res, statusRes), nil
}

// run gathers the evidence, decides and acts, then computes the conditions.
func (p *pass) run(ctx context.Context) (ctrl.Result, error) {
	if err := p.gather(ctx); err != nil {
		return ctrl.Result{}, err
	}
	p.d = decide.Decide(p.ev)
	metrics.Decisions.WithLabelValues(p.r.Kind.Name(), string(p.d.Action), string(p.d.Operation)).Inc()
	log.FromContext(ctx).V(1).Info("decided", "action", p.d.Action, "operation", p.d.Operation,
		"setBlockMove", p.d.SetBlockMove, "clearBlockMove", p.d.ClearBlockMove, "clearActiveJob", p.d.ClearActiveJob)
	res, err := p.act(ctx)
	decide.SetConditions(p.obj.GetTerraformStatus(), p.obj.GetGeneration(), p.ev, p.d, p.rep)
	if hr, ok := p.obj.(infrav1.HealthReporter); ok {
		rec := p.ev.Health.Last
		if p.rep.HealthRecord != nil {
			rec = p.rep.HealthRecord
		}
		hr.SetHealthStatus(decide.HealthStatusOf(rec))
	}
	return res, err
}

// earliest merges two results: the sooner RequeueAfter wins.
func earliest(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}
