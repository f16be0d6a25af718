// Package capimanager runs the real Cluster API core manager, built from source at the pinned
// Cluster API version (hack/build-bin.sh cluster-api builds bin/capi-manager from the module's
// core package, what Cluster API ships as its manager image), against the sandbox's control
// plane: its Cluster, Machine, MachineSet, MachineDeployment, MachinePool, MachineHealthCheck
// and topology controllers act on the objects the sandbox holds, as in a management cluster
// made with clusterctl init, and its admission webhooks judge them.
//
// The caller installs Cluster API's CRDs and its webhook configurations (pointed at
// Options.WebhookPort, with the CA of Options.CertDir's certificate); Start runs the process
// with the administrator's credentials, the ClusterTopology feature gate on, leader election
// off, and returns once /readyz answers (its webhook server is up).
//
// Invariants: the process is a child started through package proc, so it dies with the process
// that started it on every exit path; Stop ends it (SIGTERM, SIGKILL after a grace) and waits
// until it is gone; Start on error stops what it started.
package capimanager
