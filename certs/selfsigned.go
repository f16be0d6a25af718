package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// File names inside a certificate folder: the keys cert-manager writes into a TLS Secret.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
	CAName   = "ca.crt"
)

// DefaultValidity is how long SelfSigned certificates are valid.
const DefaultValidity = 365 * 24 * time.Hour

// CA is a certificate authority that signs serving certificates (and client certificates).
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate, the caBundle of the webhook configurations.
	CertPEM []byte
}

// Pair is a PEM-encoded serving certificate and its private key.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
	// Serial identifies the certificate (the same as the parsed certificate's serial number).
	Serial *big.Int
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// NewCA creates a self-signed certificate authority valid for validity (DefaultValidity when 0).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, tmpl, err := newTemplate(commonName, validity, "ca")
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sign ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse ca certificate: %w", err)
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// newTemplate generates a P-256 key and a certificate template for commonName with a random
// serial number, valid from a minute ago (clock skew) for validity (DefaultValidity when 0).
// what names the certificate in errors.
func newTemplate(commonName string, validity time.Duration, what string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	if validity <= 0 {
		validity = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", what, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	return key, &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
	}, nil
}

// Issue signs a serving certificate for hosts (DNS names or IP addresses) valid for validity
// (DefaultValidity when 0).
func (ca *CA) Issue(hosts []string, validity time.Duration) (*Pair, error) {
	if len(hosts) == 0 {
		return nil, errors.New("issue serving certificate: no host names")
	}
	key, tmpl, err := newTemplate(hosts[0], validity, "serving")
	if err != nil {
		return nil, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.sign(key, tmpl, "serving")
}

// IssueClient signs a client certificate for user in groups (the subject's common name and
// organizations, as kube-apiserver reads them) valid for validity (DefaultValidity when 0).
func (ca *CA) IssueClient(user string, groups []string, validity time.Duration) (*Pair, error) {
	if user == "" {
		return nil, errors.New("issue client certificate: no user name")
	}
	key, tmpl, err := newTemplate(user, validity, "client")
	if err != nil {
		return nil, err
	}
	tmpl.Subject.Organization = groups
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.sign(key, tmpl, "client")
}

// sign signs tmpl (a leaf for key) with ca; what names the certificate in errors.
func (ca *CA) sign(key *ecdsa.PrivateKey, tmpl *x509.Certificate, what string) (*Pair, error) {
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign %s certificate: %w", what, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM, Serial: tmpl.SerialNumber}, nil
}

// Files returns the folder content cert-manager would write for this pair signed by ca.
func (p *Pair) Files(ca *CA) map[string][]byte {
	return map[string][]byte{CertName: p.CertPEM, KeyName: p.KeyPEM, CAName: bytes.Clone(ca.CertPEM)}
}

// SelfSigned creates a CA and a serving certificate for hosts and writes tls.crt, tls.key and
// ca.crt into dir (see WriteAtomic). It returns the CA, whose CertPEM is the caBundle for the
// webhook configurations; keep it to issue the next certificate on rotation.
func SelfSigned(dir string, hosts []string) (*CA, error) {
	ca, err := NewCA("captf-webhook-ca", 0)
	if err != nil {
		return nil, err
	}
	pair, err := ca.Issue(hosts, 0)
	if err != nil {
		return nil, err
	}
	if err := WriteAtomic(dir, pair.Files(ca)); err != nil {
		return nil, err
	}
	return ca, nil
}
