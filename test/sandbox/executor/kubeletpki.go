package executor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/captf/cluster-api-provider-terraform/certs"
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

	ca *certs.CA
}

// NewKubeletPKI creates the CA and both certificates (valid for a year) and writes them into dir.
func NewKubeletPKI(dir string) (*KubeletPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubelet pki: create folder: %w", err)
	}
	ca, err := certs.NewCA("captf-sandbox-kubelet-ca", 0)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: %w", err)
	}
	serving, err := ca.Issue([]string{"127.0.0.1", "localhost"}, 0)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: %w", err)
	}
	client, err := ca.IssueClient(KubeletClientUser, []string{"system:masters"}, 0)
	if err != nil {
		return nil, fmt.Errorf("kubelet pki: %w", err)
	}
	p := &KubeletPKI{
		CAFile:          filepath.Join(dir, "ca.crt"),
		ServingCertFile: filepath.Join(dir, "kubelet.crt"), ServingKeyFile: filepath.Join(dir, "kubelet.key"),
		ClientCertFile: filepath.Join(dir, "apiserver-kubelet-client.crt"), ClientKeyFile: filepath.Join(dir, "apiserver-kubelet-client.key"),
		ca: ca,
	}
	files := map[string][]byte{
		p.CAFile:          ca.CertPEM,
		p.ServingCertFile: serving.CertPEM, p.ServingKeyFile: serving.KeyPEM,
		p.ClientCertFile: client.CertPEM, p.ClientKeyFile: client.KeyPEM,
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return nil, fmt.Errorf("kubelet pki: write %s: %w", filepath.Base(name), err)
		}
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
