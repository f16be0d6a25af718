// Package envtest starts a real control plane (the etcd and kube-apiserver that `make
// test-bins` builds from source) for the envtest suites, with CAPTF's CRDs installed and,
// optionally, Cluster API's CRDs and webhooks.
//
// It never falls back to a fake: when the binaries are missing it fails with the command that
// builds them, so a suite cannot pass vacuously.
package envtest
