package jobs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// cliConfigParams is configMapParams with a CLI configuration file from a Secret and two
// registry tokens.
func cliConfigParams() Params {
	p := configMapParams(infrav1.OperationApply)
	p.Spec.Job.CLIConfig = &infrav1.CLIConfig{
		SecretRef: &infrav1.CLIConfigKeyRef{Name: "terraform-cli", Key: "terraformrc"},
		Credentials: []infrav1.RegistryCredential{
			{Host: "registry.example.com", SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "registry-token", Key: "token"}},
			{Host: "127.0.0.1:8443", SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "mirror-token", Key: "token"}},
		},
	}
	return p
}

// TestTokenEnvName checks the spelling against the examples of Terraform's documentation of
// TF_TOKEN_ (hostCredentialsFromEnv: "café.fr" as TF_TOKEN_xn____caf__dma_fr).
func TestTokenEnvName(t *testing.T) {
	for host, want := range map[string]string{
		"app.terraform.io":        "TF_TOKEN_app_terraform_io",
		"xn--caf-dma.fr":          "TF_TOKEN_xn____caf__dma_fr",
		"my-registry.example.com": "TF_TOKEN_my__registry_example_com",
		"127.0.0.1:8443":          "TF_TOKEN_127_0_0_1:8443",
	} {
		if got := TokenEnvName(host); got != want {
			t.Errorf("TokenEnvName(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestValidateCredentialHost(t *testing.T) {
	for _, ok := range []string{"registry.example.com", "app.terraform.io", "xn--caf-dma.fr", "127.0.0.1:8443", "a.b:1", "a.b:65535", "localhost"} {
		if err := ValidateCredentialHost(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Registry.example.com", "café.fr", "https://registry.example.com", "registry.example.com/path",
		"reg_istry.example.com", "-a.example.com", "a.example.com:", "a.example.com:0", "a.example.com:65536", "a.example.com:08443",
		"a.example.com:x", "a.example.com:1:2", "a b.com", "a.com=x"} {
		if err := ValidateCredentialHost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBuildCLIConfig: the CLI configuration file is one key of its Secret or ConfigMap,
// mounted read-only into the main container alone, which TF_CLI_CONFIG_FILE names; each
// credential is a TF_TOKEN_<host> of the main container alone, read by the kubelet from its
// Secret key; the install and state channel containers get neither; and Build refuses an
// invalid host (as admission does) and both file sources at once. Every Secret the pod names is
// the Job's per-run copy of the one the spec names (modulesecrets.RenamePod).
func TestBuildCLIConfig(t *testing.T) {
	p := cliConfigParams()
	job, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	copyOf := func(source string) string {
		i := slices.Index(modulesecrets.PodSecretNames(&p.Spec), source)
		if i < 0 {
			t.Fatalf("%s is not a pod Secret of the spec", source)
		}
		return naming.RunModuleSecretName(job.Name, i)
	}
	pod := job.Spec.Template.Spec
	main := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range main.Env {
		env[e.Name] = e
	}
	if e := env[EnvCLIConfigFile]; e.Value != CLIConfigDir+"/"+CLIConfigFile {
		t.Errorf("%s = %q", EnvCLIConfigFile, e.Value)
	}
	for name, secret := range map[string]string{"TF_TOKEN_registry_example_com": "registry-token", "TF_TOKEN_127_0_0_1:8443": "mirror-token"} {
		e, ok := env[name]
		if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != copyOf(secret) || e.ValueFrom.SecretKeyRef.Key != "token" ||
			e.ValueFrom.SecretKeyRef.Optional == nil || *e.ValueFrom.SecretKeyRef.Optional {
			t.Errorf("%s = %+v, want a required secretKeyRef to %s/token", name, e, secret)
		}
	}
	var mounted bool
	for _, m := range main.VolumeMounts {
		if m.Name == VolumeCLIConfig {
			mounted = m.MountPath == CLIConfigDir && m.ReadOnly
		}
	}
	if !mounted {
		t.Errorf("main container mounts no read-only %s at %s: %+v", VolumeCLIConfig, CLIConfigDir, main.VolumeMounts)
	}
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == VolumeCLIConfig {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != copyOf("terraform-cli") || len(vol.Secret.Items) != 1 ||
		vol.Secret.Items[0] != (corev1.KeyToPath{Key: "terraformrc", Path: CLIConfigFile}) {
		t.Fatalf("volume %s = %+v, want the one key terraformrc of Secret terraform-cli", VolumeCLIConfig, vol)
	}
	for _, c := range pod.InitContainers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "TF_") {
				t.Errorf("%s container has %s", c.Name, e.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == VolumeCLIConfig {
				t.Errorf("%s container mounts %s", c.Name, VolumeCLIConfig)
			}
		}
	}

	// A ConfigMap file, no credentials.
	p = configMapParams(infrav1.OperationDestroy)
	p.Spec.Job.CLIConfig = &infrav1.CLIConfig{ConfigMapRef: &infrav1.CLIConfigKeyRef{Name: "mirror", Key: "cli.tfrc"}}
	job, err = Build(p)
	if err != nil {
		t.Fatal(err)
	}
	vol = nil
	for i := range job.Spec.Template.Spec.Volumes {
		if job.Spec.Template.Spec.Volumes[i].Name == VolumeCLIConfig {
			vol = &job.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != "mirror" || vol.ConfigMap.Items[0].Key != "cli.tfrc" {
		t.Fatalf("volume %s = %+v, want key cli.tfrc of ConfigMap mirror", VolumeCLIConfig, vol)
	}

	// Only credentials: no file, no TF_CLI_CONFIG_FILE, no volume.
	p = configMapParams(infrav1.OperationApply)
	p.Spec.Job.CLIConfig = &infrav1.CLIConfig{Credentials: cliConfigParams().Spec.Job.CLIConfig.Credentials[:1]}
	job, err = Build(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == EnvCLIConfigFile {
			t.Errorf("%s set without a file", EnvCLIConfigFile)
		}
	}
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == VolumeCLIConfig {
			t.Errorf("volume %s without a file", VolumeCLIConfig)
		}
	}

	for name, mutate := range map[string]func(*infrav1.CLIConfig){
		"invalid host": func(c *infrav1.CLIConfig) { c.Credentials[0].Host = "Registry.Example.com" },
		"twice":        func(c *infrav1.CLIConfig) { c.Credentials[1].Host = c.Credentials[0].Host },
		"both files":   func(c *infrav1.CLIConfig) { c.ConfigMapRef = &infrav1.CLIConfigKeyRef{Name: "x", Key: "y"} },
	} {
		p := cliConfigParams()
		mutate(p.Spec.Job.CLIConfig)
		if _, err := Build(p); err == nil || !strings.Contains(err.Error(), "cliConfig") {
			t.Errorf("%s: Build error %v, want one about cliConfig", name, err)
		}
	}
}
