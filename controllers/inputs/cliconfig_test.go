package inputs

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestCLIConfigSourcesMustOptIn proves that CheckCLIConfig accepts the sources of
// spec.job.cliConfig only when each exists, carries captf.io/variables=true and holds its key:
// the CLI configuration file's Secret or ConfigMap and every credential's Secret. A refusal
// names the source (and, for a missing label, the command that opts it in) and never a value.
func TestCLIConfigSourcesMustOptIn(t *testing.T) {
	const token = "registry-t0ken"
	tokenSecret := func(labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: ns, Labels: labels},
			Data: map[string][]byte{"token": []byte(token)}}
	}
	fileConfigMap := func(labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cli", Namespace: ns, Labels: labels},
			Data: map[string]string{"config.tfrc": `provider_installation { direct {} }`}}
	}
	fileSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cli", Namespace: ns, Labels: optIn()},
		Data: map[string][]byte{"config.tfrc": []byte(`credentials "r.example.com" { token = "x" }`)}}
	cfg := func(file string, hosts ...string) *infrav1.CLIConfig {
		c := &infrav1.CLIConfig{}
		switch file {
		case "Secret":
			c.SecretRef = &infrav1.CLIConfigKeyRef{Name: "cli", Key: "config.tfrc"}
		case "ConfigMap":
			c.ConfigMapRef = &infrav1.CLIConfigKeyRef{Name: "cli", Key: "config.tfrc"}
		}
		for _, h := range hosts {
			c.Credentials = append(c.Credentials, infrav1.RegistryCredential{Host: h, SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "registry", Key: "token"}})
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		objs   []client.Object
		cfg    *infrav1.CLIConfig
		reason string // "" means accepted
		want   string
	}{
		{name: "all opted in", objs: []client.Object{fileConfigMap(optIn()), tokenSecret(optIn())}, cfg: cfg("ConfigMap", "r.example.com")},
		{name: "Secret file opted in", objs: []client.Object{fileSecret}, cfg: cfg("Secret")},
		{name: "no cliConfig", cfg: nil},
		{name: "file ConfigMap without the label", objs: []client.Object{fileConfigMap(nil), tokenSecret(optIn())}, cfg: cfg("ConfigMap", "r.example.com"),
			reason: infrav1.VariablesSourceNotOptedInReason,
			want:   "spec.job.cliConfig.configMapRef (ConfigMap " + ns + "/cli) is not labelled captf.io/variables=true"},
		{name: "credential Secret without the label", objs: []client.Object{fileConfigMap(optIn()), tokenSecret(map[string]string{"app": "registry"})},
			cfg: cfg("ConfigMap", "r.example.com"), reason: infrav1.VariablesSourceNotOptedInReason,
			want: "kubectl label secret registry -n " + ns + " captf.io/variables=true"},
		{name: "credential Secret labelled false", objs: []client.Object{tokenSecret(map[string]string{VariablesLabel: "false"})},
			cfg: cfg("", "r.example.com"), reason: infrav1.VariablesSourceNotOptedInReason,
			want: "spec.job.cliConfig.credentials[0] (host r.example.com) (Secret " + ns + "/registry)"},
		{name: "credential Secret missing", objs: []client.Object{fileConfigMap(optIn())}, cfg: cfg("ConfigMap", "r.example.com"),
			reason: infrav1.InputsSourceMissingReason, want: "(Secret " + ns + "/registry) does not exist"},
		{name: "file Secret missing", cfg: cfg("Secret"), reason: infrav1.InputsSourceMissingReason, want: "spec.job.cliConfig.secretRef"},
		{name: "key missing", objs: []client.Object{tokenSecret(optIn())}, cfg: func() *infrav1.CLIConfig {
			c := cfg("", "r.example.com")
			c.Credentials[0].SecretKeyRef.Key = "password"
			return c
		}(), reason: infrav1.InvalidInputsReason, want: `has no key "password"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCLIConfig(context.Background(), fakeReader(t, tc.objs...), ns, tc.cfg)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			msg := expectReason(t, err, tc.reason)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not contain %q", msg, tc.want)
			}
			if strings.Contains(msg, token) {
				t.Errorf("the message carries the token: %s", msg)
			}
		})
	}
}
