package certs_test

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/certs"
)

// parse reads the certificate of a PEM block.
func parse(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A client certificate names its user and groups as kube-apiserver reads them, and verifies
// against its CA for client authentication only; a serving one for its hosts only.
func TestIssuedCertificatesVerifyForTheirUseOnly(t *testing.T) {
	ca, err := certs.NewCA("test-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parse(t, ca.CertPEM))

	client, err := ca.IssueClient("kube-apiserver-kubelet-client", []string{"system:masters"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, client.CertPEM)
	if c.Subject.CommonName != "kube-apiserver-kubelet-client" || !slices.Equal(c.Subject.Organization, []string{"system:masters"}) {
		t.Fatalf("subject %v: want the user as common name and the groups as organizations", c.Subject)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the client certificate does not verify for client auth: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("the client certificate verifies as a serving certificate")
	}
	if _, err := ca.IssueClient("", nil, 0); err == nil {
		t.Fatal("a client certificate without a user was issued")
	}

	serving, err := ca.Issue([]string{"127.0.0.1", "localhost"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := parse(t, serving.CertPEM)
	if _, err := s.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Fatalf("the serving certificate does not verify for localhost: %v", err)
	}
	if _, err := s.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("the serving certificate verifies as a client certificate")
	}
}
