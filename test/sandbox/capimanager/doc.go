// Package capimanager runs the real Cluster API managers, built from source at the pinned
// Cluster API version (hack/build-bin.sh cluster-api), against the sandbox's control plane: the
// core manager (bin/capi-manager, the module's core package, what Cluster API ships as its
// manager image), whose Cluster, Machine, MachineSet, MachineDeployment, MachinePool,
// MachineHealthCheck and topology controllers act on the objects the sandbox holds, and
// kubeadm's bootstrap and control plane managers (bin/capi-kubeadm-bootstrap,
// bin/capi-kubeadm-control-plane), which a ClusterClass's control plane and workers need, as in
// a management cluster made with clusterctl init. Their admission webhooks judge the objects.
//
// Providers names the three (inventory name, namespace, binary, config folder in the module,
// CRD group, webhook configuration names). The caller installs each one's CRDs and webhook
// configurations (pointed at Options.WebhookPort, with the CA of Options.CertDir's
// certificate); Start runs one process with the administrator's credentials, the ClusterTopology
// feature gate on, leader election off, and returns once /readyz answers (its webhook server is
// up). A manager that exits because a port it binds was taken in the meantime (it says "address
// already in use" anywhere in its output) starts again, up to three times, on new health and
// diagnostics ports and on a new webhook port its configurations are first pointed at
// (Options.MoveWebhookPort).
//
// Invariants: each process is a child started through package proc, so it dies with the process
// that started it on every exit path; Stop ends it (SIGTERM, SIGKILL after a grace) and waits
// until it is gone; Start on error stops what it started.
package capimanager
