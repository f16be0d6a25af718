package jobs

import "strings"

// ReservedEnv lists the environment variable names a user may not set through
// spec.job.env: CAPTF sets them itself, or they would move the Terraform state, change the
// commands the runner runs, or feed variables past the inputs hash and the redact list. An
// entry ending in "*" is a prefix. The admission webhook refuses them; Build refuses them too.
var ReservedEnv = []string{
	// The runner's own settings.
	"CAPTF_*",
	// Terraform and OpenTofu settings: TF_WORKSPACE and TF_DATA_DIR move the state,
	// TF_CLI_ARGS* add flags such as -lock=false, TF_VAR_* are variables that bypass the
	// inputs hash and redaction, TF_LOG can print secrets.
	"TF_*",
	"TOFU_*",
	// KUBECONFIG and KUBE_CONFIG_PATH switch the runner from the pod's service account to a
	// kubeconfig; the other KUBE_* variables (KUBE_HOST, KUBE_TOKEN, KUBE_CTX,
	// KUBE_PROXY_URL, ...) point Terraform's kubernetes backend at another cluster even when the
	// backend block says otherwise. The runner removes them; refusing them tells the user at
	// once. Configure a module's kubernetes or helm provider through variables instead.
	"KUBECONFIG",
	"KUBE_*",
}

// IsReservedEnv reports whether name matches ReservedEnv.
func IsReservedEnv(name string) bool {
	for _, r := range ReservedEnv {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == r {
			return true
		}
	}
	return false
}
