// Package deploy tests CAPTF the way a platform team installs it: the kustomize tree in
// config/ rendered by a real kustomize, the clusterctl release manifest (`make
// release-manifests`) read by a real clusterctl from a local provider repository and applied to
// a real kube-apiserver (envtest, with cert-manager's and Cluster API's CRDs), cert-manager's own
// controllers (package certmanager, the version go.mod pins) issuing the release's serving
// certificate and injecting its CA, the manager running under the rendered RBAC with its
// webhooks called through the installed configurations, the samples and their offline modules, the Dockerfile and the flag reference.
//
// Invariants: every tool is the one the Makefile builds into bin/ (kustomize, clusterctl,
// etcd, kube-apiserver, cert-manager-controllers); a missing tool fails the suite with the command that builds it, never
// skips. The package holds no production code: only this file and tests.
package deploy
