package setup

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// The defaults of the Options whose flag and zero value mean the same: cmd/manager's flags
// default to these and withDefaults fills them in, so the two cannot drift apart.
const (
	DefaultMetricsAddr = ":8080"
	DefaultProbeAddr   = ":8081"
	DefaultConcurrency = 4
	DefaultSyncPeriod  = 10 * time.Minute
	DefaultWebhookPort = 9443
)

// Options configure the manager. The zero value of a field means its documented default; the
// flags of cmd/manager map one to one onto these fields (docs/configuration.md).
type Options struct {
	// MetricsAddr is where metrics are served ("0" disables). Default ":8080".
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz. Default ":8081".
	ProbeAddr string
	// LeaderElection turns leader election on. Default off (the Deployment turns it on).
	LeaderElection bool
	// LeaderElectionNamespace is where the leader election Lease lives.
	LeaderElectionNamespace string
	// WatchNamespace restricts the manager to one namespace ("" = all).
	WatchNamespace string
	// WatchFilter makes the manager one shard of a fleet, the Cluster API way: it caches and
	// reconciles only the objects labelled cluster.x-k8s.io/watch-filter=<WatchFilter> (CAPTF's
	// three kinds and Cluster API's Clusters, Machines and MachinePools), and only the Jobs and
	// Secrets CAPTF made for them, which carry their owner's label. "" (the default) reconciles
	// every object, labelled or not. It must be a valid label value. Its leader election Lease
	// is its own (LeaderElectionID), so shards never wait for each other. The webhooks judge
	// every object whatever its shard: they read through the API server.
	WatchFilter string
	// Concurrency is the number of workers per controller. Default 4.
	Concurrency int
	// ClusterOperationGate makes a cluster's mutating Jobs and its machines' mutating Jobs
	// wait for each other (docs/leases.md). Default true; set DisableClusterOperationGate.
	DisableClusterOperationGate bool
	// RunnerImage is the manager's own image: an init container copies the runner from it
	// into every Job. Default "ghcr.io/captf/cluster-api-provider-terraform:dev".
	RunnerImage string
	// RuntimeImage runs ConfigMap modules (it must hold terraform or tofu). Default: jobs.DefaultRuntimeImage.
	RuntimeImage string
	// SyncPeriod is how often every object is reconciled even without events. Default 10m.
	SyncPeriod time.Duration
	// EnableWebhooks serves the admission webhooks. Default true in cmd/manager.
	EnableWebhooks bool
	// WebhookPort and WebhookCertDir configure the webhook server.
	WebhookPort    int
	WebhookCertDir string
	// WebhookCertPollInterval is how often the certificate files are re-read besides file
	// events. Default certs.DefaultPollInterval (5s).
	WebhookCertPollInterval time.Duration
	// Clock drives backoff and lease ages. Default the real clock; tests inject a fake one.
	Clock clock.Clock
	// GuardOverrideGroups may force a guarded removal with captf.io/guard-override-reason,
	// and abandon an object's infrastructure (captf.io/abandon-infrastructure).
	GuardOverrideGroups []string
	// PlanApproverGroups may approve a saved plan (captf.io/approve-plan=<plan ID>). Empty by
	// default: nobody may, and plans that wait for approval keep waiting. Flag
	// --plan-approver-groups (comma-separated). The manager writes them into the ConfigMap
	// webhooks.PlanApproversConfigMap of its namespace (PlanApproversNamespace), which the
	// ValidatingAdmissionPolicy of config/policy reads, when it starts and again whenever it
	// finds the ConfigMap changed or missing (every PlanApproversResync).
	PlanApproverGroups []string
	// PlanApproversNamespace is where that ConfigMap lives. Default: the Pod's namespace from
	// $POD_NAMESPACE (config/manager sets it), else the namespace of ManagerServiceAccount;
	// when neither is known the ConfigMap is not kept (a manager run by hand against a cluster
	// without config/policy).
	PlanApproversNamespace string
	// AudienceProbeNamespace is where the ServiceAccount jobs.DefaultAudienceProbeAccountName
	// lives, which the identity-token audience check mints its short-lived probe tokens for
	// (jobs.AudienceProbe; the account has no permissions). The manager creates it when it
	// starts and when the engine finds it missing. Default: PlanApproversNamespace's default
	// (the Pod's namespace, else the namespace of ManagerServiceAccount), else "default".
	AudienceProbeNamespace string
	// IdentityNamespace is the manager's namespace, where the Secrets of TerraformIdentities live
	// (docs/production.md, "Scoped identities"). Default: PlanApproversNamespace's default (the
	// Pod's namespace, else the namespace of ManagerServiceAccount); when neither is known,
	// objects that reference an identity run no Job (InputsValid=False, IdentityInvalid).
	IdentityNamespace string
	// PlanApproversResync is how often the manager checks that ConfigMap after the start.
	// Default 1m.
	PlanApproversResync time.Duration
	// ManagerServiceAccount is the manager's own identity for the Lease and Job guards
	// ("<namespace>/<name>" or "system:serviceaccount:<namespace>:<name>"). Empty by default:
	// the manager asks the API server which user it authenticates as. Flag
	// --manager-service-account.
	ManagerServiceAccount string
	// StateBackups is how many backups of each object's state to keep (0 keeps none). The
	// flag --state-backups defaults it to 5; a zero Options keeps none.
	StateBackups int
	// StateReplica names the object store that keeps a sealed copy of every state version
	// (docs/state.md, "The replica"); a zero value keeps no replica. Flags --state-replica-*.
	StateReplica ReplicaOptions
	// StateReplicaStore, when set, is the replica store itself (tests), and StateReplica is
	// not read.
	StateReplicaStore *replica.Store
	// DriftInterval is the drift check interval of objects that set none (0: their checks
	// are off). Flag --drift-interval, default 0.
	DriftInterval time.Duration
	// MaxActiveJobs bounds the Jobs the manager runs at once (0: no bound); MaxBackgroundJobs
	// bounds the drift checks among them (0: no bound besides MaxActiveJobs). Flags
	// --max-active-jobs (default 50) and --max-background-jobs (default 10).
	MaxActiveJobs     int
	MaxBackgroundJobs int
}

func (o Options) withDefaults() Options {
	if o.MetricsAddr == "" {
		o.MetricsAddr = DefaultMetricsAddr
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = DefaultProbeAddr
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.RunnerImage == "" {
		o.RunnerImage = "ghcr.io/captf/cluster-api-provider-terraform:dev"
	}
	if o.SyncPeriod == 0 {
		o.SyncPeriod = DefaultSyncPeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.PlanApproverGroups = webhooks.ParseGroups(strings.Join(o.PlanApproverGroups, ","))
	o.GuardOverrideGroups = webhooks.ParseGroups(strings.Join(o.GuardOverrideGroups, ","))
	if o.PlanApproversNamespace == "" {
		o.PlanApproversNamespace = strings.TrimSpace(os.Getenv(webhooks.EnvPodNamespace))
	}
	if o.PlanApproversNamespace == "" {
		o.PlanApproversNamespace = webhooks.ServiceAccountNamespace(o.ManagerServiceAccount)
	}
	if o.AudienceProbeNamespace == "" {
		o.AudienceProbeNamespace = o.PlanApproversNamespace
	}
	if o.IdentityNamespace == "" {
		o.IdentityNamespace = o.PlanApproversNamespace
	}
	if o.AudienceProbeNamespace == "" {
		o.AudienceProbeNamespace = metav1.NamespaceDefault
	}
	if o.PlanApproversResync == 0 {
		o.PlanApproversResync = time.Minute
	}
	if o.WebhookPort == 0 {
		o.WebhookPort = DefaultWebhookPort
	}
	if o.WebhookCertDir == "" {
		o.WebhookCertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	return o
}

// ReplicaOptions name the state replica's object store. The credentials and the encryption key
// come from a Secret of the manager's namespace, read once when the manager starts (a new key or
// new credentials take a restart).
type ReplicaOptions struct {
	// Bucket is the bucket's name; "" keeps no replica. Flag --state-replica-bucket.
	Bucket string
	// Endpoint is the S3-compatible store's URL; "" is AWS S3. Flag --state-replica-endpoint.
	Endpoint string
	// Region is the bucket's region (default us-east-1). Flag --state-replica-region.
	Region string
	// PathStyle addresses the bucket in the URL path, as most S3-compatible servers want.
	// Flag --state-replica-path-style.
	PathStyle bool
	// Prefix goes before every key (several management clusters in one bucket). Flag
	// --state-replica-prefix.
	Prefix string
	// Secret is the Secret of the manager's namespace (IdentityNamespace) with the keys
	// accessKeyID, secretAccessKey and encryptionKey (32 bytes), and optionally
	// encryptionKeyID (default: the Secret's name). Flag --state-replica-secret.
	Secret string
}
