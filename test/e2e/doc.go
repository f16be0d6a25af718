// Package e2e tests CAPTF end to end in the sandbox (test/sandbox, cmd/sandbox): the manager
// binary with its webhooks, the real runner and a real terraform or tofu run by the Job
// executor, driven with the source-built kubectl and clusterctl.
//
// What it proves: the samples reach Ready from `make run` with the contract fields their
// modules output, an input change applies once more, deleting a Cluster destroys through
// destroy Jobs and leaves no state, inputs, per-run Secret or CAPTF lease behind; kubectl
// cannot remove block-move or the finalizer while a Job runs, and a paused object gets its
// block-move cleared once the Job ended; a manager killed during an apply and restarted runs
// no second apply; and clusterctl move from one sandbox to another waits for a running apply,
// carries the state and the durable inputs over, destroys nothing in the source, and the
// target resumes without an apply.
//
// Tenants (tenant_helpers_test.go, tenant_test.go): the actors of docs/threat-model.md act
// through impersonation, never as the administrator. asTenant(sb, ns) creates namespace ns and
// binds the user tenant-<ns> to Kubernetes' built-in ClusterRole edit in it (a RoleBinding);
// asCAPTFEditor(sb, ns) binds captf-editor-<ns> to captf-tenant-edit alone; bindUser(sb, ns,
// user, clusterRole) binds any other. Each first installs the tenants' ClusterRoles as
// config/default renders them and waits until the clusterrole-aggregation controller copied
// them into edit, admin and view. The returned tenant has Client() (a controller-runtime
// client with rest.Config.Impersonate), Kubectl and MustKubectl (kubectl --as=<user> in its
// namespace) and CanI (kubectl auth can-i). An attack row of the threat model becomes one It
// in tenant_test.go that acts as its row's actor and expects the refusal or the harmless
// outcome the row documents.
//
// The suite builds the manager, the runner and the sandbox from this checkout into a temporary
// folder, so it never tests stale binaries; the control plane, kubectl, clusterctl and
// kustomize come from bin/ (`make test-bins`). It fails, and never skips, when they are missing.
package e2e
