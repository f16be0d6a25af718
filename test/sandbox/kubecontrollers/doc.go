// Package kubecontrollers runs the real kube-controller-manager and kube-scheduler, built from
// source at the pinned Kubernetes version (hack/build-bin.sh kubernetes), against a control
// plane that envtest started: the sandbox (package sandbox, `make run`) and the suites that run
// Jobs use them, so a Job is driven by the Kubernetes Job controller, its Pods are bound by the
// scheduler, and owned objects are collected by the Kubernetes garbage collector, as in the
// clusters CAPTF's users run. The executor (package executor) plays only the node.
//
// kube-controller-manager runs the controllers of Controllers (the ClusterRole aggregation, Job,
// garbage collector, namespace, ServiceAccount and token, root CA publisher, TTL-after-finished,
// node lifecycle, taint eviction and pod garbage collector controllers), each under its own ServiceAccount
// (--use-service-account-credentials, as kubeadm clusters run it), so the admission guards see
// the identities they see in a cluster (system:serviceaccount:kube-system:generic-garbage-collector
// and so on). Both processes serve /healthz on a free loopback port; Start returns once both
// answer and the controllers did their first work (the namespace "default" has its ServiceAccount
// and its kube-root-ca.crt ConfigMap, and the built-in ClusterRole edit has rules).
//
// Invariants: both processes are children started through package proc, so they die with the
// process that started them on every exit path; Stop ends them (SIGTERM, SIGKILL after a grace)
// and waits until they are gone; Start on error stops whatever it started.
package kubecontrollers
