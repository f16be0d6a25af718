// Command manager runs the CAPTF controllers and admission webhooks.
//
// Flags map one to one onto setup.Options (cmd/manager/setup, the manager's wiring);
// docs/configuration.md documents each.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/captf/cluster-api-provider-terraform/certs"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

// parseFlags reads the manager's flags into setup.Options and the logger's options. Every
// group-list flag is read with the one parser, webhooks.ParseGroups: spaces trimmed, empty and
// repeated entries dropped.
func parseFlags(args []string) (setup.Options, zap.Options, error) {
	var o setup.Options
	var gate bool
	var groups, approvers string
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", setup.DefaultMetricsAddr, "address of the metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", setup.DefaultProbeAddr, "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader among replicas; only the leader reconciles")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", "", "reconcile objects of this namespace only (default: all)")
	fs.StringVar(&o.WatchFilter, "watch-filter", "", "reconcile only objects labelled cluster.x-k8s.io/watch-filter=<value>, Cluster API's sharding label (default: all objects)")
	fs.IntVar(&o.Concurrency, "concurrency", setup.DefaultConcurrency, "workers per controller")
	fs.BoolVar(&gate, "cluster-operation-gate", true, "a cluster's and its machines' mutating Jobs wait for each other")
	fs.StringVar(&o.RunnerImage, "runner-image", "", "image the runner is copied from into every Job (the manager's own image)")
	fs.StringVar(&o.RuntimeImage, "runtime-image", "", "image that runs ConfigMap modules; must hold terraform or tofu")
	fs.DurationVar(&o.SyncPeriod, "sync-period", setup.DefaultSyncPeriod, "how often every object is reconciled without events")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", true, "serve the admission webhooks (the manager waits for a certificate in --webhook-cert-dir)")
	fs.IntVar(&o.WebhookPort, "webhook-port", setup.DefaultWebhookPort, "port of the webhook server")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key (reloaded on change)")
	fs.DurationVar(&o.WebhookCertPollInterval, "webhook-cert-poll-interval", certs.DefaultPollInterval, "how often the certificate files are re-read besides file change events")
	fs.StringVar(&groups, "guard-override-groups", "", "comma-separated groups whose members may force a guarded removal or abandon an object's infrastructure")
	fs.StringVar(&approvers, "plan-approver-groups", "", "comma-separated groups whose members may approve a saved plan (captf.io/approve-plan=<plan ID>); empty: nobody may")
	fs.StringVar(&o.ManagerServiceAccount, "manager-service-account", "", "the manager's own identity, whose writes the Lease and Job guards let through: <namespace>/<name> or system:serviceaccount:<namespace>:<name> (default: the user the manager authenticates as, its Pod's ServiceAccount)")
	fs.DurationVar(&o.DriftInterval, "drift-interval", 0, "drift check interval of objects whose spec.drift.interval is unset; 0 turns their checks off")
	fs.IntVar(&o.MaxActiveJobs, "max-active-jobs", 50, "the most Jobs the manager runs at once; 0 means no bound")
	fs.IntVar(&o.MaxBackgroundJobs, "max-background-jobs", 10, "the most drift-check Jobs among them, so applies and destroys are never starved; 0 means no bound besides --max-active-jobs")
	fs.IntVar(&o.StateBackups, "state-backups", 5, "backups of each object's Terraform state to keep after the Jobs that change it (0 takes none)")
	fs.StringVar(&o.StateReplica.Bucket, "state-replica-bucket", "", "bucket of an S3-compatible store that keeps a sealed copy of every state version (docs/state.md); empty keeps no replica")
	fs.StringVar(&o.StateReplica.Endpoint, "state-replica-endpoint", "", "URL of the S3-compatible store (empty: AWS S3)")
	fs.StringVar(&o.StateReplica.Region, "state-replica-region", "us-east-1", "region of the replica's bucket")
	fs.BoolVar(&o.StateReplica.PathStyle, "state-replica-path-style", false, "address the bucket in the URL path, as most S3-compatible servers want")
	fs.StringVar(&o.StateReplica.Prefix, "state-replica-prefix", "", "prefix of every key in the bucket (several management clusters in one bucket)")
	fs.StringVar(&o.StateReplica.Secret, "state-replica-secret", "", "Secret of the manager's namespace with accessKeyID, secretAccessKey, encryptionKey (32 bytes) and optionally encryptionKeyID")
	zo := zap.Options{}
	zo.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return setup.Options{}, zap.Options{}, err
	}
	o.DisableClusterOperationGate = !gate
	o.GuardOverrideGroups = webhooks.ParseGroups(groups)
	o.PlanApproverGroups = webhooks.ParseGroups(approvers)
	return o, zo, nil
}

func run() error {
	o, zo, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	gate := !o.DisableClusterOperationGate
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zo)))
	limit, err := setup.SetMemoryLimit(os.Getenv)
	if err != nil {
		return err
	}
	if limit > 0 {
		ctrl.Log.Info("soft memory limit set from the container's", "bytes", limit, "percent", setup.MemoryLimitPercent)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := setup.New(cfg, o)
	if err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "gate", gate, "webhooks", o.EnableWebhooks)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
