package webhooks_test

// The harness: a control plane with the webhook configuration rendered from config/webhook
// installed for real, and a manager that serves only the webhooks. It returns errors instead
// of asserting, so the Ginkgo suite and the benchmark share it.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// kubectlPath is the kubectl the Makefile builds from source. Tests that need it fail (never
// skip) when it is missing, and say how to build it.
func kubectlPath() (string, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kubectl not found at %s: run 'make kubectl-bin' to build it from source: %w", p, err)
	}
	return p, nil
}

// rendered is the webhook configuration as deployed: config/webhook rendered by kustomize.
type rendered struct {
	Mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	Validating []*admissionregistrationv1.ValidatingWebhookConfiguration
}

// kustomize runs `kubectl kustomize config/<dir>` and splits the output into its YAML
// documents.
func kustomize(kubectl, dir string) ([][]byte, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(root, "config", dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/%s: %w: %s", dir, err, stderr.String())
	}
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split rendered config/%s: %w", dir, err)
		}
		docs = append(docs, doc)
	}
}

// renderConfig runs `kubectl kustomize config/webhook` and decodes the webhook configurations.
func renderConfig(kubectl string) (*rendered, error) {
	docs, err := kustomize(kubectl, "webhook")
	if err != nil {
		return nil, err
	}
	r := &rendered{}
	for _, doc := range docs {
		var tm metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("read kind: %w", err)
		}
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := utilyaml.Unmarshal(doc, c); err != nil {
				return nil, fmt.Errorf("decode %s: %w", tm.Kind, err)
			}
			r.Mutating = append(r.Mutating, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := utilyaml.Unmarshal(doc, c); err != nil {
				return nil, fmt.Errorf("decode %s: %w", tm.Kind, err)
			}
			r.Validating = append(r.Validating, c)
		}
	}
	if len(r.Mutating) == 0 || len(r.Validating) == 0 {
		return nil, fmt.Errorf("config/webhook renders %d mutating and %d validating configurations; run 'make manifests'", len(r.Mutating), len(r.Validating))
	}
	return r, nil
}

// validating returns the rendered validating webhook of that name.
func (r *rendered) validating(name string) *admissionregistrationv1.ValidatingWebhook {
	for _, c := range r.Validating {
		for i := range c.Webhooks {
			if c.Webhooks[i].Name == name {
				return &c.Webhooks[i]
			}
		}
	}
	return nil
}

// controlPlaneOptions configure the control plane the suite and the benchmarks start through
// test/envtest: CAPTF's and Cluster API's CRDs and the rendered webhook configuration (envtest
// points its clientConfig at a local port).
func controlPlaneOptions(r *rendered) (envtest.Options, error) {
	capi, err := envtest.ClusterAPICRDs()
	if err != nil {
		return envtest.Options{}, err
	}
	// envtest rewrites the clientConfig of what it installs: hand it copies, keep the rendered.
	wio := &ctrlenvtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	for _, c := range r.Mutating {
		wio.MutatingWebhooks = append(wio.MutatingWebhooks, c.DeepCopy())
	}
	for _, c := range r.Validating {
		wio.ValidatingWebhooks = append(wio.ValidatingWebhooks, c.DeepCopy())
	}
	return envtest.Options{ExtraCRDPaths: []string{capi}, Webhooks: wio}, nil
}

// blindCache has seen nothing: every Get is NotFound and every List is empty. The webhook
// manager runs with it, so a guard that read through the manager's cache instead of the API
// server would find no Job, no pod and no lease, and allow every removal.
type blindCache struct{ cache.Cache }

func (blindCache) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "blind-cache"}, key.Name)
}

func (blindCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// hookServer is a manager serving only the CAPTF webhooks (webhooks.Setup), no controllers.
type hookServer struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

// webhookServerOptions binds a webhook server where envtest told the API server to call.
func webhookServerOptions(env *envtest.Env) webhook.Options {
	w := env.WebhookInstallOptions
	return webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}
}

// managerServiceAccount is the identity the webhook manager is told is its own
// (--manager-service-account): the Lease and Job guards let its writes through.
const managerServiceAccount = "captf-system/captf-controller-manager"

// managerUser is the username of managerServiceAccount.
const managerUser = "system:serviceaccount:captf-system:captf-controller-manager"

// hookOptions are the webhook manager's flags the specs vary.
type hookOptions struct {
	// overrideGroups is --guard-override-groups; approverGroups --plan-approver-groups.
	overrideGroups, approverGroups []string
}

func startHookServer(cfg *rest.Config, env *envtest.Env, o hookOptions) (*hookServer, error) {
	s, err := setup.NewScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 s,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhookServerOptions(env)),
		NewCache: func(c *rest.Config, o cache.Options) (cache.Cache, error) {
			real, err := cache.New(c, o)
			return blindCache{real}, err
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create webhook manager: %w", err)
	}
	if err := webhooks.Setup(mgr, webhooks.Options{OverrideGroups: o.overrideGroups, PlanApproverGroups: o.approverGroups,
		ManagerServiceAccount: managerServiceAccount}); err != nil {
		return nil, err
	}
	return runManager(mgr)
}

// managerClient authenticates as the manager's ServiceAccount (a client certificate whose
// name is the ServiceAccount's username, as the sandbox gives the manager), with every
// permission: the client the suite plays the manager with.
func managerClient(env *envtest.Env) (client.Client, *rest.Config, error) {
	user, err := env.AddUser(ctrlenvtest.User{Name: managerUser, Groups: []string{"system:masters", "system:serviceaccounts", "system:authenticated"}}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("add the manager's user: %w", err)
	}
	cfg := user.Config()
	cfg.QPS, cfg.Burst = env.Config.QPS, env.Config.Burst // the manager's own client is not throttled below the admin's
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("manager client: %w", err)
	}
	return c, cfg, nil
}

// runManager starts mgr and waits until its webhook server accepts connections.
func runManager(mgr manager.Manager) (*hookServer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hookServer{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- mgr.Start(ctx) }()
	started := mgr.GetWebhookServer().StartedChecker()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-h.done:
			return false, fmt.Errorf("manager stopped before serving: %w", err)
		default:
		}
		return started(nil) == nil, nil
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("wait for the webhook server: %w", err)
	}
	return h, nil
}

// stop stops the manager and waits until it has (its port is free again).
func (h *hookServer) stop() error {
	if h == nil {
		return nil
	}
	h.cancel()
	select {
	case err := <-h.done:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("webhook manager did not stop within 30s")
	}
}

// webhookCalls is how many requests the webhook server answered on path, from
// controller-runtime's controller_runtime_webhook_requests_total counter.
func webhookCalls(path string) (float64, error) {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && (path == "" || l.GetValue() == path) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n, nil
}

// webhookTime is the total time (seconds) and the number of requests the webhook server spent
// on path, from controller-runtime's controller_runtime_webhook_latency_seconds histogram.
func webhookTime(path string) (float64, uint64, error) {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_webhook_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount(), nil
				}
			}
		}
	}
	return 0, 0, nil
}
