package setup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/prometheus/client_golang/prometheus"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/certs"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobslots"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformcluster"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachine"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachinepool"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// CacheOptions is the manager's cache: Jobs only when managed by CAPTF, everything fails
// loudly if read without an informer started for it. With a watch filter, every type is
// cached only where it carries the shard's label.
func CacheOptions(o Options) cache.Options {
	managed := shardSelector(o, labels.Set{infrav1.ManagedLabel: "true"})
	co := cache.Options{
		ReaderFailOnMissingInformer: true,
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: managed, Transform: withoutPodTemplate},
			// Only the metadata of CAPTF's own Secrets (state, backups, inputs, outputs, per-run):
			// whether the state Secret is there, and the backups, without a live read per pass.
			engine.SecretMetadata(): {Label: managed},
		},
		DefaultTransform: slimmed,
	}
	if o.WatchFilter != "" {
		shard := shardSelector(o, nil)
		for _, obj := range []client.Object{&infrav1.TerraformCluster{}, &infrav1.TerraformMachine{}, &infrav1.TerraformMachinePool{},
			&clusterv1.Cluster{}, &clusterv1.Machine{}, &clusterv1.MachinePool{}} {
			co.ByObject[obj] = cache.ByObject{Label: shard}
		}
	}
	if o.SyncPeriod > 0 {
		sp := o.SyncPeriod
		co.SyncPeriod = &sp
	}
	if o.WatchNamespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	return co
}

// BootstrapCacheOptions is the second cache of the manager: the metadata of the Secrets
// labelled cluster.x-k8s.io/cluster-name, which Cluster API's bootstrap contract puts on
// bootstrap data. A bootstrap data Secret's resourceVersion then tells a machine or pool whether
// its content changed, with no read of the content (engine.Reconciler.BootstrapMeta). It is a
// cache of its own because the manager's cache holds one selector per type, and CAPTF's own
// Secrets (captf.io/managed=true) need not carry the label.
//
// CAPTF's own Secrets of machines and pools carry the label too, but are no bootstrap data
// and no input of another object: they are left out (memberSecrets), so the cache does not
// hold their metadata a second time, nor does each of their events map to every machine and
// pool of the cluster. A TerraformCluster's Secrets stay: its state is its members' input.
func BootstrapCacheOptions(o Options, mgr manager.Manager) (cache.Options, error) {
	hasCluster, err := labels.NewRequirement(infrav1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, fmt.Errorf("select labelled secrets: %w", err)
	}
	notMembers, err := labels.NewRequirement(infrav1.OwnerKindLabel, selection.NotIn, memberSecrets)
	if err != nil {
		return cache.Options{}, fmt.Errorf("select labelled secrets: %w", err)
	}
	co := cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		ReaderFailOnMissingInformer: true,
		ByObject: map[client.Object]cache.ByObject{
			engine.SecretMetadata(): {Label: shardSelector(o, nil).Add(*hasCluster, *notMembers)},
		},
		DefaultTransform: slimmed,
	}
	if o.WatchNamespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	return co, nil
}

// memberSecrets are the captf.io/owner-kind values of the Secrets BootstrapCacheOptions leaves
// out: those CAPTF made for a TerraformMachine or a TerraformMachinePool.
var memberSecrets = []string{infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind}

// slimmed is the transform of every cached object: its managed fields and kubectl's
// last-applied-configuration annotation go, as both are bookkeeping of other writers that no
// reader of the caches looks at, and the annotation is a whole copy of the object when it was
// written with kubectl apply. The manager writes the objects it reads from the caches only
// with merge patches, which name the fields they change and leave the rest (these two among
// them) as they are on the server; what it writes with an update it reads live.
func slimmed(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	if m, ok := obj.(metav1.Object); ok {
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				m.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

// withoutPodTemplate is the transform of the cached Jobs: slimmed, and their pod template
// goes. Nothing reads a Job's pod template from the cache (a Job is judged by its labels,
// annotations, owner references and status, and adopted only after a live read), and the
// template is most of a Job's size: a fleet's cache holds every object's last Jobs.
func withoutPodTemplate(obj any) (any, error) {
	obj, err := slimmed(obj)
	if err != nil {
		return obj, err
	}
	if job, ok := obj.(*batchv1.Job); ok {
		job.Spec.Template = corev1.PodTemplateSpec{}
	}
	return obj, nil
}

// shardSelector selects set, and with a watch filter only the shard's objects
// (cluster.x-k8s.io/watch-filter=<WatchFilter>).
func shardSelector(o Options, set labels.Set) labels.Selector {
	all := labels.Set{}
	for k, v := range set {
		all[k] = v
	}
	if o.WatchFilter != "" {
		all[infrav1.WatchFilterLabel] = o.WatchFilter
	}
	return labels.SelectorFromSet(all)
}

// ClientOptions makes Pods, Leases, Secrets, ConfigMaps and RBAC objects always live.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{
		&corev1.Pod{}, &coordinationv1.Lease{}, &corev1.Secret{}, &corev1.ConfigMap{},
		&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{},
	}}}
}

// NewScheme returns the scheme the manager needs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, batchv1.AddToScheme, coordinationv1.AddToScheme, rbacv1.AddToScheme,
		authenticationv1.AddToScheme, clusterv1AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// New builds the manager with its controllers. Extra manager options (tests pass their own
// metrics and health addresses, a cache double) are applied last. The steps, in order: the
// manager's options, the manager, the lease rules, the audience probe account keeper, the
// webhooks (when enabled), the plan approvers keeper, the three controllers, the health checks
// and the serving certificate.
func New(cfg *rest.Config, o Options, extra ...func(*manager.Options)) (manager.Manager, error) {
	o = o.withDefaults()
	mo, serving, err := managerOptions(o)
	if err != nil {
		return nil, err
	}
	for _, f := range extra {
		f(&mo)
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	leaseOpts := runlease.DefaultOptions()
	leaseOpts.ClusterOperationGate = !o.DisableClusterOperationGate
	leaseOpts.Clock = o.Clock
	leases := runlease.New(mgr.GetClient(), mgr.GetAPIReader(), leaseOpts)
	probeAccount := types.NamespacedName{Namespace: o.AudienceProbeNamespace, Name: jobs.DefaultAudienceProbeAccountName}
	if err := addAdmission(mgr, o, leases, probeAccount); err != nil {
		return nil, err
	}
	if err := addControllers(mgr, o, leases, probeAccount); err != nil {
		return nil, err
	}
	if err := addChecks(mgr); err != nil {
		return nil, err
	}
	if err := addServingCertificate(mgr, serving); err != nil {
		return nil, err
	}
	return mgr, nil
}

// managerOptions are the manager's options before the caller's extras: the scheme, the scoped
// cache, the live client, the endpoints, leader election, the first-in-first-out queue and,
// with webhooks, the webhook server and its certificate.
func managerOptions(o Options) (manager.Options, *certs.Serving, error) {
	if errs := validation.IsValidLabelValue(o.WatchFilter); len(errs) > 0 {
		return manager.Options{}, nil, fmt.Errorf("--watch-filter %q is not a label value: %s", o.WatchFilter, strings.Join(errs, "; "))
	}
	s, err := NewScheme()
	if err != nil {
		return manager.Options{}, nil, err
	}
	mo := manager.Options{
		Scheme:                  s,
		Cache:                   CacheOptions(o),
		Client:                  ClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        leaderElectionID(o),
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Stop reconciling at once when leadership is lost or the context ends.
		LeaderElectionReleaseOnCancel: true,
		// First in, first out: every object queued is reconciled in its turn. controller-runtime's
		// priority queue (its default) files the objects a starting manager learns from the initial
		// list below every change event, and keeps that priority across requeues: while runs keep
		// the workers busy, an object created just before a restart would get no pass at all (the
		// soak's liveness finding; test/chaos "A busy queue at start-up").
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
	}
	var serving *certs.Serving
	if o.EnableWebhooks {
		mo.WebhookServer, serving = webhookServer(o)
	}
	return mo, serving, nil
}

// leaderElectionID names the leader election Lease: one per shard, so that the managers of
// two shards never wait for each other.
func leaderElectionID(o Options) string {
	if o.WatchFilter != "" {
		return "captf-manager-" + o.WatchFilter + ".infrastructure.cluster.x-k8s.io"
	}
	return "captf-manager.infrastructure.cluster.x-k8s.io"
}

// addAdmission adds what admission relies on: the keeper of the audience probe account, the
// webhooks (when enabled) and the keeper of the plan approvers ConfigMap (when its namespace
// is known).
func addAdmission(mgr manager.Manager, o Options, leases *runlease.Manager, probeAccount types.NamespacedName) error {
	if err := mgr.Add(audienceProbeAccount{reader: mgr.GetAPIReader(), client: mgr.GetClient(), account: probeAccount}); err != nil {
		return fmt.Errorf("add the audience probe account keeper: %w", err)
	}
	if o.EnableWebhooks {
		if err := webhooks.Setup(mgr, webhooks.Options{OverrideGroups: o.GuardOverrideGroups, Leases: leases,
			ManagerServiceAccount: o.ManagerServiceAccount, PlanApproverGroups: o.PlanApproverGroups,
			Audiences: jobs.AudienceProbe{Client: mgr.GetClient(), Account: probeAccount}}); err != nil {
			return fmt.Errorf("set up webhooks: %w", err)
		}
	}
	if o.PlanApproversNamespace == "" {
		mgr.GetLogger().Info("the plan approvers ConfigMap is not kept: no namespace known ($POD_NAMESPACE or --manager-service-account)")
		return nil
	}
	if err := mgr.Add(&planApprovers{client: mgr.GetClient(), namespace: o.PlanApproversNamespace,
		groups: append([]string(nil), o.PlanApproverGroups...), resync: o.PlanApproversResync}); err != nil {
		return fmt.Errorf("add the plan approvers keeper: %w", err)
	}
	return nil
}

// addControllers sets up the reconciler of each of the three kinds; they share the lease
// rules and the manager-wide Job slots.
func addControllers(mgr manager.Manager, o Options, leases *runlease.Manager, probeAccount types.NamespacedName) error {
	slots := &jobslots.Slots{Max: o.MaxActiveJobs, MaxBackground: o.MaxBackgroundJobs, Cache: mgr.GetClient()}
	bo, err := BootstrapCacheOptions(o, mgr)
	if err != nil {
		return err
	}
	bootstrapMeta, err := cache.New(mgr.GetConfig(), bo)
	if err != nil {
		return fmt.Errorf("create the bootstrap data metadata cache: %w", err)
	}
	if err := mgr.Add(bootstrapMeta); err != nil {
		return fmt.Errorf("add the bootstrap data metadata cache: %w", err)
	}
	store, err := stateReplica(context.Background(), mgr, mgr.GetAPIReader(), o, o.IdentityNamespace)
	if err != nil {
		return err
	}
	started := o.Clock.Now()
	for _, k := range []engine.Kind{terraformcluster.Kind{}, terraformmachine.Kind(), terraformmachinepool.Kind()} {
		r := &engine.Reconciler{
			Client:            mgr.GetClient(),
			APIReader:         mgr.GetAPIReader(),
			SecretMeta:        mgr.GetCache(),
			BootstrapMeta:     bootstrapMeta,
			StateBackups:      o.StateBackups,
			StateReplica:      store,
			DriftInterval:     o.DriftInterval,
			Started:           started,
			Slots:             slots,
			Kind:              k,
			Leases:            leases,
			Recorder:          mgr.GetEventRecorder("captf-" + k.Name()),
			Clock:             o.Clock,
			Jobs:              jobs.Defaults{RunnerImage: o.RunnerImage, RuntimeImage: o.RuntimeImage},
			Audiences:         jobs.AudienceProbe{Client: mgr.GetClient(), Account: probeAccount, CreateAccount: true},
			IdentityNamespace: o.IdentityNamespace,
		}
		if err := r.SetupWithManager(mgr, o.Concurrency); err != nil {
			return fmt.Errorf("set up %s controller: %w", k.Name(), err)
		}
	}
	return nil
}

// addChecks registers the objects gauge and the health and readiness checks.
func addChecks(mgr manager.Manager) error {
	if err := metrics.RegisterObjects(mgr.GetClient()); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return fmt.Errorf("register the objects gauge: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz: %w", err)
	}
	return nil
}
