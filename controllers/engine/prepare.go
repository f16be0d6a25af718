package engine

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// preparer readies what a Job of one object runs with, just before the Job is created: the
// run's inputs (inputs.go), the credentials it carries (its runner account and RBAC, rbac.go;
// its TerraformIdentity, terraformidentity.go; its CLI configuration, cliconfig.go) and the
// Secrets its pod reads (modulesecrets.go). It judges each source live, never from the cache,
// and writes the per-run Secrets. It sees the object, the clients and the pass's event outbox;
// nothing of the decision but what a call passes in.
type preparer struct {
	// c writes; live reads through the API server.
	c    client.Client
	live client.Reader
	// obj is the object; subject names it for its Secrets (suffix, kind, Cluster).
	obj     Object
	subject state.Subject
	// identityNS is the manager's namespace (Reconciler.IdentityNamespace).
	identityNS string
	// audiences judges spec.job.identityToken's audience (Reconciler.Audiences).
	audiences jobs.AudienceProber
	// jobs are the manager's Job defaults (Reconciler.Jobs).
	jobs jobs.Defaults
	// out queues the events the checks report (the pass's outbox).
	out *outbox
}
