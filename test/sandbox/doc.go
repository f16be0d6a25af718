// Package sandbox runs CAPTF locally the way a management cluster would run it, without a
// container runtime: a control plane (the etcd and kube-apiserver that `make test-bins` builds
// from source), CAPTF's, Cluster API's, cert-manager's and clusterctl's CRDs with the labels
// clusterctl looks for, clusterctl's provider inventory, cert-manager's own controllers at the
// version go.mod pins (package certmanager), the manager binary as a child process serving its
// admission webhooks (the configurations and the Issuers and Certificates rendered from
// config/default, pointed at the child), the real kube-controller-manager and kube-scheduler
// (package kubecontrollers), the real Cluster API managers with their webhooks (package
// capimanager: the core and kubeadm's bootstrap and control plane managers), the node
// that runs the scheduled pods as local processes and serves their logs to the API server as a
// kubelet does (package executor; kube-apiserver runs with the kubelet client flags of
// executor.KubeletPKI), and the workload clusters' side of Cluster API (package workload: each Cluster's
// kubeconfig Secret names the sandbox's own API server, where a Node is registered for each
// providerID a Machine or MachinePool reports). cmd/sandbox (`make run`) and test/e2e use it.
//
// The manager runs under the ClusterRole of config/rbac as the ServiceAccount the Deployment
// uses, and every Job's runner under the runner's ServiceAccount (a token bound to its Pod), so
// RBAC in the sandbox is the RBAC of a cluster; kube-controller-manager's controllers each use
// their own ServiceAccount, as in a cluster. The sandbox itself, the executor, the workload
// controller, the Cluster API manager and cert-manager's controllers use an administrator's credentials.
//
// The executor and the workload controller log through Options.Log at V(1) (debug) unless
// Options.Verbose: a user sees the Jobs' output, the manager's and the sandbox's own lines.
//
// Every webhook serving certificate, CAPTF's and each Cluster API manager's, is issued by
// cert-manager from the project's own Certificate (for CAPTF config/certmanager as config/default
// renders it; for Cluster API its manager's config/certmanager/certificate.yaml under the names
// its config/default gives), with one change, forLoopback: also for localhost and 127.0.0.1,
// where the webhooks are served. The webhook configurations carry cert-manager.io/inject-ca-from
// and cert-manager's cainjector fills their caBundle; the sandbox never writes a caBundle. A watch
// on each issued Secret copies it into its manager's certificate folder on every issue, as the
// kubelet updates a mounted Secret (ServingCertificates lists them).
//
// Invariants: Stop leaves no process behind (the manager, every container, the Cluster API
// manager, cert-manager's controllers, the kube controllers and the control plane are stopped, SIGKILL after a grace period); children started by a sandbox die with it
// on every exit path, SIGKILL included: Start enables the guard of package proc, which kills
// what a process that ended without stopping left (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, the Cluster API manager, cert-manager's controllers, the manager, every container's session) and removes its kubeconfig and temporary work folder; a binary calls
// StopGuard last. Nothing is applied to the control plane beyond what Start documents unless
// the caller asks (ApplySamples).
package sandbox
