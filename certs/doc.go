// Package certs owns the webhook server's serving certificate.
//
// In a cluster, cert-manager issues the certificate into a Secret that the Deployment mounts;
// Serving reads tls.crt and tls.key from that folder with controller-runtime's certwatcher, so
// a rotated certificate is served on the next TLS handshake without a restart. The sandbox runs
// cert-manager too and copies its Secret into the folder with WriteAtomic, and so does
// test/deploy; cert-manager's cainjector fills the webhook configurations' caBundle in both.
// SelfSigned creates a CA and a serving certificate signed by it and writes them into a folder
// laid out the way the kubelet lays out a Secret volume, for tests of Serving itself.
// A CA also issues client certificates (IssueClient): the sandbox's node and
// API server authenticate each other with them as a kubelet and kube-apiserver do.
//
// Invariants:
//   - Serving never serves a half-written pair: a certificate and key that do not match are
//     refused and the previous pair stays in use, so a rotation never fails a handshake.
//   - The manager starts without the certificate: Serving waits for the files to appear, and
//     its readiness check fails until a certificate is loaded and the webhook server answers
//     TLS, so no Service sends admission requests to a replica that cannot complete them.
//   - WriteAtomic replaces every file of a folder in one rename (the kubelet's ..data symlink
//     swap), so a reader never sees a new certificate next to an old key.
package certs
