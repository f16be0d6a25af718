package v1alpha1

// CLIConfig is the Terraform (or OpenTofu) CLI configuration of an object's Jobs: a CLI
// configuration file (private module registries, provider_installation with a network mirror,
// host blocks) and registry credentials. Both reach only the main (terraform) container; the
// state channel sees neither. The file and every credential Secret must be in the object's
// namespace and carry the opt-in label captf.io/variables=true, as variablesFrom sources do:
// before every Job the controller reads them live and holds the object (InputsValid=False,
// VariablesSourceNotOptedIn or InputsSourceMissing) when one lacks the label or is missing
// (TestCLIConfigSourcesMustOptIn). docs/production.md names the tests that prove the rest.
// +kubebuilder:validation:XValidation:rule="!(has(self.secretRef) && has(self.configMapRef))",message="set at most one of cliConfig.secretRef and cliConfig.configMapRef"
type CLIConfig struct {
	// secretRef names the Secret key that holds the CLI configuration file. The Job mounts that
	// one key, read-only, into the main container and sets TF_CLI_CONFIG_FILE to it
	// (TestBuildCLIConfig); terraform and tofu read it there (TestRunnerIntegration, "the
	// runner with a CLI configuration").
	// +optional
	SecretRef *CLIConfigKeyRef `json:"secretRef,omitempty"`

	// configMapRef names the ConfigMap key that holds the CLI configuration file, mounted as
	// secretRef is. Use a Secret when the file holds credentials blocks.
	// +optional
	ConfigMapRef *CLIConfigKeyRef `json:"configMapRef,omitempty"`

	// credentials are registry tokens: each sets TF_TOKEN_<host> in the main container only,
	// from the Secret key it names through the kubelet (the token is copied into no CAPTF
	// object, no Job and no condition message: TestBuildCLIConfig,
	// TestCLIConfigSourcesMustOptIn), with the host spelled as Terraform and OpenTofu read it
	// back (periods as "_", hyphens as "__", a port kept: TestTokenEnvName).
	// host is a lowercase DNS host name, optionally with a port (registry.example.com,
	// localhost:8443); the admission webhook refuses any other (TestValidateCLIConfig).
	// terraform and tofu send the token to that host's registry (TestRunnerIntegration, "the
	// runner with a CLI configuration").
	// +optional
	// +listType=map
	// +listMapKey=host
	// +kubebuilder:validation:MaxItems=16
	Credentials []RegistryCredential `json:"credentials,omitempty"`
}

// CLIConfigKeyRef names one key of a Secret or ConfigMap in the object's namespace.
type CLIConfigKeyRef struct {
	// name of the Secret or ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in its data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// RegistryCredential is the token of one registry host.
type RegistryCredential struct {
	// host of the registry, as module sources and provider addresses spell it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=259
	Host string `json:"host"`

	// secretKeyRef names the Secret key that holds the token.
	// +required
	SecretKeyRef CLIConfigKeyRef `json:"secretKeyRef"`
}
