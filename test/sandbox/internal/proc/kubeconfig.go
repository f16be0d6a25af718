package proc

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteAccess writes, into dir, what a child needs to reach the API server as cfg's user: a
// kubeconfig (dir/kubeconfig) and the API server's CA (dir/ca.crt). It returns both paths.
func WriteAccess(cfg *rest.Config, dir string) (kubeconfig, caFile string, err error) {
	caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, cfg.CAData, 0o600); err != nil {
		return "", "", fmt.Errorf("write the API server's CA: %w", err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*Kubeconfig(cfg), kubeconfig); err != nil {
		return "", "", fmt.Errorf("write a kubeconfig: %w", err)
	}
	return kubeconfig, caFile, nil
}

// Kubeconfig is cfg as a kubeconfig with one cluster, user and context (all named sandbox),
// the credentials inline.
func Kubeconfig(cfg *rest.Config) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sandbox"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "sandbox"}
	kc.CurrentContext = "sandbox"
	return kc
}
