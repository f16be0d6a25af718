// Package certmanager runs cert-manager's own controllers for tests and the sandbox: the
// cert-manager-controllers program (test/certmanager/cmd/cert-manager-controllers, built into
// the tool cache by `hack/build-bin.sh cert-manager`) started as a child process against an
// API server, and cert-manager's CRDs as the cert-manager module at the version go.mod pins
// ships them (its deploy/crds folder).
//
// The controllers issue Certificates from SelfSigned and CA Issuers and ClusterIssuers, and
// cert-manager's cainjector fills the caBundle of webhook configurations and CRD conversion
// webhooks annotated cert-manager.io/inject-ca-from; the program's doc.go lists what runs and
// what does not.
//
// Invariants: a started process stops with Stop (SIGTERM, then SIGKILL after a grace period,
// which Stop reports as an error), and by itself once the process that started it is gone, so a
// test that dies leaves no controller behind; CRDDir and Binary fail with the command that
// fixes what is missing, never silently.
package certmanager
