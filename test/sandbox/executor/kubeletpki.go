package executor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KubeletClientUser is the identity of the API server's kubelet client certificate, as kubeadm
// names it; the node serves its container logs to this user only.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// KubeletPKI is what the API server and the node need to talk as the API server and a kubelet
// do: a CA, the node's serving certificate for 127.0.0.1 it signs, and the API server's kubelet
// client certificate it signs. NewKubeletPKI writes them into a folder before the API server
// starts (it reads them at start-up); APIServerFlags are the flags that point it at them.
type KubeletPKI struct {
	// CAFile is the CA, the API server's --kubelet-certificate-authority.
	CAFile string
	// ServingCertFile and ServingKeyFile are the node's serving certificate (127.0.0.1,
	// localhost) and key.
	ServingCertFile, ServingKeyFile string
	// ClientCertFile and ClientKeyFile are the API server's kubelet client certificate
	// (KubeletClientUser) and key.
	ClientCertFile, ClientKeyFile string

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewKubeletPKI creates the CA and both certificates (valid for a year) and writes them into dir.
func NewKubeletPKI(dir string) (*KubeletPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubelet pki: create folder: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: generate ca key: %w", err)
	}
	caTmpl, err := certTemplate("captf-sandbox-kubelet-ca", nil)
	if err != nil {
		return nil, err
	}
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: sign ca: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: parse ca: %w", err)
	}
	p := &KubeletPKI{
		CAFile:          filepath.Join(dir, "ca.crt"),
		ServingCertFile: filepath.Join(dir, "kubelet.crt"), ServingKeyFile: filepath.Join(dir, "kubelet.key"),
		ClientCertFile: filepath.Join(dir, "apiserver-kubelet-client.crt"), ClientKeyFile: filepath.Join(dir, "apiserver-kubelet-client.key"),
		caCert: caCert, caKey: caKey,
	}
	if err := os.WriteFile(p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, fmt.Errorf("kubelet pki: write ca: %w", err)
	}
	serving, servingKey, err := p.issue("captf-sandbox-kubelet", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := writePair(p.ServingCertFile, p.ServingKeyFile, serving, servingKey); err != nil {
		return nil, err
	}
	client, clientKey, err := p.issue(KubeletClientUser, []string{"system:masters"}, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if err := writePair(p.ClientCertFile, p.ClientKeyFile, client, clientKey); err != nil {
		return nil, err
	}
	return p, nil
}

// APIServerFlags point kube-apiserver at the node as at a kubelet: its client certificate and
// key, the CA that must have signed the node's serving certificate, and the node's InternalIP
// first (the sandbox node's host name resolves nowhere).
func (p *KubeletPKI) APIServerFlags() map[string]string {
	return map[string]string{
		"kubelet-client-certificate":      p.ClientCertFile,
		"kubelet-client-key":              p.ClientKeyFile,
		"kubelet-certificate-authority":   p.CAFile,
		"kubelet-preferred-address-types": "InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
	}
}

// issue signs a certificate for commonName (organizations are its groups) with one extended key
// usage, for hosts (DNS names or IP addresses) when it serves. It returns the PEM certificate
// and key.
func (p *KubeletPKI) issue(commonName string, organizations []string, usage x509.ExtKeyUsage, hosts ...string) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet pki: generate key of %s: %w", commonName, err)
	}
	tmpl, err := certTemplate(commonName, organizations)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet pki: sign %s: %w", commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet pki: encode key of %s: %w", commonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// certTemplate is a certificate valid from a minute ago for a year, with a random serial.
func certTemplate(commonName string, organizations []string) (*x509.Certificate, error) {
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour)}, nil
}

func writePair(certFile, keyFile string, cert, key []byte) error {
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return fmt.Errorf("kubelet pki: write %s: %w", filepath.Base(certFile), err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return fmt.Errorf("kubelet pki: write %s: %w", filepath.Base(keyFile), err)
	}
	return nil
}
