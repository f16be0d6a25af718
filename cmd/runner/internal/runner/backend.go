package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// BackendOverrideFile is the override file the runner writes into the module copy. Terraform
// and OpenTofu let a backend block in an override file replace the module's own backend.
const BackendOverrideFile = "zz_captf_backend_override.tf.json"

// BackendMode says how the kubernetes backend reaches the API server.
type BackendMode struct {
	// InCluster uses the pod's service account.
	InCluster bool
	// ConfigPaths are kubeconfig files (from KUBE_CONFIG_PATH, else KUBECONFIG).
	ConfigPaths []string
}

// DetectBackendMode reads KUBE_CONFIG_PATH, then KUBECONFIG: either one set means a kubeconfig;
// neither means in-cluster. KUBECONFIG may list several files.
func DetectBackendMode(getenv func(string) string) BackendMode {
	if p := getenv(runnerapi.EnvKubeConfigPath); p != "" {
		return BackendMode{ConfigPaths: []string{p}}
	}
	if p := getenv(runnerapi.EnvKubeConfig); p != "" {
		var paths []string
		for _, s := range filepath.SplitList(p) {
			if s != "" {
				paths = append(paths, s)
			}
		}
		if len(paths) > 0 {
			return BackendMode{ConfigPaths: paths}
		}
	}
	return BackendMode{InCluster: true}
}

// BackendOverride renders the override file. Besides the namespace, the suffix and the way in,
// it pins the connection settings that the backend would otherwise take from KUBE_*
// environment variables (KUBE_HOST, KUBE_TOKEN, KUBE_CTX, ...), which must never move the state
// to another cluster. OpenTofu honours the pins; Terraform treats "" as unset and still reads
// the variables, so ChildEnv also removes them.
func BackendOverride(b runnerapi.Backend, mode BackendMode) ([]byte, error) {
	cfg := map[string]any{
		"namespace":              b.Namespace,
		"secret_suffix":          b.SecretSuffix,
		"host":                   "",
		"username":               "",
		"password":               "",
		"token":                  "",
		"insecure":               false,
		"client_certificate":     "",
		"client_key":             "",
		"cluster_ca_certificate": "",
	}
	if mode.InCluster {
		cfg["in_cluster_config"] = true
	} else {
		cfg["in_cluster_config"] = false
		cfg["config_context"] = ""
		cfg["config_context_auth_info"] = ""
		cfg["config_context_cluster"] = ""
		if len(mode.ConfigPaths) == 1 {
			cfg["config_path"] = mode.ConfigPaths[0]
		} else {
			cfg["config_paths"] = mode.ConfigPaths
		}
	}
	doc := map[string]any{"terraform": map[string]any{"backend": map[string]any{"kubernetes": cfg}}}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render backend override: %w", err)
	}
	return append(out, '\n'), nil
}

// writeBackendOverride writes the override file into the module copy.
func writeBackendOverride(moduleDir string, b runnerapi.Backend, mode BackendMode) error {
	out, err := BackendOverride(b, mode)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(moduleDir, BackendOverrideFile), out, 0o644); err != nil {
		return fmt.Errorf("write backend override: %w", err)
	}
	return nil
}

// VerifyBackend reads what init recorded in <module>/.terraform/terraform.tfstate and checks it
// is the kubernetes backend with CAPTF's namespace and suffix. It catches a module whose own
// override files (sorted after CAPTF's) put the state elsewhere: such a state would be
// invisible to the controller.
func VerifyBackend(moduleDir string, want runnerapi.Backend) error {
	rec, err := readBackendRecord(moduleDir)
	if err != nil {
		return err
	}
	if rec.Type != "kubernetes" {
		return badInput("the module's backend is %q after init, not CAPTF's kubernetes backend: remove backend blocks from the module's override files", rec.Type)
	}
	ns, _ := rec.Config["namespace"].(string)
	suffix, _ := rec.Config["secret_suffix"].(string)
	if ns != want.Namespace || suffix != want.SecretSuffix {
		return badInput("the kubernetes backend after init stores state in %s/%s, not %s/%s: remove backend settings from the module's override files",
			ns, runnerapi.StateSecretName(suffix), want.Namespace, runnerapi.StateSecretName(want.SecretSuffix))
	}
	return nil
}

// ChannelBackend is how terraform reaches the state channel: its state URL and password.
type ChannelBackend struct {
	// Base is the channel's address (http://127.0.0.1:<port>).
	Base string
	// URL is the state's address on the channel (<Base>/state/<ns>/<suffix>), also its lock
	// and unlock address.
	URL string
	// PlanURL is the plan endpoint (<Base>/plan/<ns>/<suffix>).
	PlanURL string
	// Password is the channel's per-run credential; it reaches terraform only through
	// TF_HTTP_PASSWORD, never a file in the module copy.
	Password string
}

// HTTPBackendOverride is the override file of a channel run: an empty http backend block,
// which replaces the module's own backend block. Every setting comes from the environment
// (HTTPBackendEnv).
func HTTPBackendOverride() []byte {
	return []byte(`{"terraform": {"backend": {"http": {}}}}` + "\n")
}

// httpBackendKeys are the http backend's settings the channel run sets through TF_HTTP_*.
var httpBackendKeys = []string{"address", "lock_address", "unlock_address", "update_method", "lock_method", "unlock_method", "username", "password"}

// HTTPBackendEnv is the http backend's configuration for the channel, as environment variables.
// Terraform and OpenTofu record in .terraform (and in a saved plan) only what the configuration
// and -backend-config set, never these: so a plan saved by one Job is applied by another Job
// through that Job's own channel address and credential, and no plan file holds a credential.
func HTTPBackendEnv(c ChannelBackend) []string {
	return []string{
		"TF_HTTP_ADDRESS=" + c.URL,
		"TF_HTTP_LOCK_ADDRESS=" + c.URL,
		"TF_HTTP_UNLOCK_ADDRESS=" + c.URL,
		"TF_HTTP_UPDATE_METHOD=POST",
		"TF_HTTP_LOCK_METHOD=LOCK",
		"TF_HTTP_UNLOCK_METHOD=UNLOCK",
		"TF_HTTP_USERNAME=" + runnerapi.ChannelUsername,
		"TF_HTTP_PASSWORD=" + c.Password,
	}
}

// VerifyHTTPBackend reads what init recorded and checks it is the http backend with none of
// its connection settings configured: they all come from HTTPBackendEnv. It catches a module
// whose own override files (sorted after CAPTF's) replace the backend or point it elsewhere.
func VerifyHTTPBackend(moduleDir string) error {
	rec, err := readBackendRecord(moduleDir)
	if err != nil {
		return err
	}
	if rec.Type != "http" {
		return badInput("the module's backend is %q after init, not the http backend of CAPTF's state channel: remove backend blocks from the module's override files", rec.Type)
	}
	for _, k := range httpBackendKeys {
		if v, ok := rec.Config[k]; ok && v != nil {
			return badInput("the http backend after init has %s set by the module's configuration: remove backend settings from the module's override files", k)
		}
	}
	return nil
}

// backendRecord is what init records in .terraform/terraform.tfstate.
type backendRecord struct {
	Type   string
	Config map[string]any
}

func readBackendRecord(moduleDir string) (backendRecord, error) {
	b, err := os.ReadFile(filepath.Join(moduleDir, ".terraform", "terraform.tfstate"))
	if errors.Is(err, fs.ErrNotExist) {
		return backendRecord{}, badInput("init recorded no backend: the module does not use the backend CAPTF configures")
	}
	if err != nil {
		return backendRecord{}, fmt.Errorf("read backend record: %w", err)
	}
	var rec struct {
		Backend *struct {
			Type   string         `json:"type"`
			Config map[string]any `json:"config"`
		} `json:"backend"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return backendRecord{}, fmt.Errorf("parse backend record: %w", err)
	}
	if rec.Backend == nil {
		return backendRecord{Type: "none"}, nil
	}
	return backendRecord{Type: rec.Backend.Type, Config: rec.Backend.Config}, nil
}
