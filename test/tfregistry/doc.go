// Package tfregistry is a test helper: a loopback HTTPS server that speaks Terraform's module
// registry protocol (service discovery at /.well-known/terraform.json with modules.v1, the
// versions and download endpoints, X-Terraform-Get to a tar.gz archive it serves) and refuses
// every registry request without its bearer token. It serves TLS with a certificate for
// localhost and 127.0.0.1 signed by a CA it generates and writes to a PEM file, which a
// terraform or tofu process trusts through SSL_CERT_FILE (Go's crypto/x509 reads it on Linux).
//
// Product code never imports it; the runner's integration tests and the e2e suite do.
package tfregistry
