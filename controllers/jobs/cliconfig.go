package jobs

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The CLI configuration of spec.job.cliConfig in the main container.
const (
	// VolumeCLIConfig holds the one key of the CLI configuration file, mounted only into the
	// main container.
	VolumeCLIConfig = "captf-cliconfig"
	// CLIConfigDir is where it is mounted, and CLIConfigFile the file's name there.
	CLIConfigDir  = "/var/run/secrets/captf.io/cliconfig"
	CLIConfigFile = "config.tfrc"
	// EnvCLIConfigFile is the variable terraform and tofu read the CLI configuration file's
	// path from.
	EnvCLIConfigFile = "TF_CLI_CONFIG_FILE"
	// TokenEnvPrefix starts the variable of a registry host's token (TokenEnvName).
	TokenEnvPrefix = "TF_TOKEN_"
)

// TokenEnvName is the variable terraform and tofu read host's registry token from: TF_TOKEN_
// and the host with each hyphen spelled "__" and each period "_" (both binaries turn "__" back
// into a hyphen, then "_" into a period; a port stays as it is). host must be a valid credential
// host (ValidateCredentialHost), so the spelling is never ambiguous: a label never starts or
// ends with a hyphen.
func TokenEnvName(host string) string {
	return TokenEnvPrefix + strings.NewReplacer("-", "__", ".", "_").Replace(host)
}

// ValidateCredentialHost refuses a registry host that is not a lowercase DNS host name (an IP
// address in dotted form is one), optionally followed by ":" and a port from 1 to 65535.
// Upper case and non-ASCII names are refused: terraform compares hosts in their lowercase
// Punycode form, so write xn--... for an international name.
func ValidateCredentialHost(host string) error {
	name, port, hasPort := strings.Cut(host, ":")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("host %q is not a lowercase DNS host name with an optional port: %s", host, strings.Join(errs, "; "))
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("host %q has port %q, not a number from 1 to 65535", host, port)
		}
	}
	return nil
}

// cliConfigVolume is the volume of the CLI configuration file, when the spec names one: only
// its one key, read-only, mounted into the main container alone.
func cliConfigVolume(p Params) []specVolume {
	c := p.Spec.Job.CLIConfig
	if c == nil || (c.SecretRef == nil && c.ConfigMapRef == nil) {
		return nil
	}
	var src corev1.VolumeSource
	if r := c.SecretRef; r != nil {
		src.Secret = &corev1.SecretVolumeSource{SecretName: r.Name, DefaultMode: ptr.To[int32](0o440), Optional: ptr.To(false),
			Items: []corev1.KeyToPath{{Key: r.Key, Path: CLIConfigFile}}}
	} else {
		r := c.ConfigMapRef
		src.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name},
			DefaultMode: ptr.To[int32](0o444), Optional: ptr.To(false), Items: []corev1.KeyToPath{{Key: r.Key, Path: CLIConfigFile}}}
	}
	return []specVolume{{
		volume: corev1.Volume{Name: VolumeCLIConfig, VolumeSource: src},
		mount:  corev1.VolumeMount{Name: VolumeCLIConfig, MountPath: CLIConfigDir, ReadOnly: true},
	}}
}

// cliConfigEnv is the main container's CLI configuration: TF_CLI_CONFIG_FILE when the spec
// names a file, and one TF_TOKEN_<host> per credential, read by the kubelet from the Secret key
// (the token's value is never in the Job).
func cliConfigEnv(p Params) []corev1.EnvVar {
	c := p.Spec.Job.CLIConfig
	if c == nil {
		return nil
	}
	var env []corev1.EnvVar
	if c.SecretRef != nil || c.ConfigMapRef != nil {
		env = append(env, corev1.EnvVar{Name: EnvCLIConfigFile, Value: path.Join(CLIConfigDir, CLIConfigFile)})
	}
	for _, cred := range c.Credentials {
		env = append(env, corev1.EnvVar{Name: TokenEnvName(cred.Host), ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cred.SecretKeyRef.Name}, Key: cred.SecretKeyRef.Key, Optional: ptr.To(false)}}})
	}
	return env
}

// checkCLIConfig refuses a cliConfig that sets both file sources, or a credential whose host
// is not valid or repeats another's.
func checkCLIConfig(c *infrav1.CLIConfig) []error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.SecretRef != nil && c.ConfigMapRef != nil {
		errs = append(errs, errors.New("spec.job.cliConfig sets both secretRef and configMapRef"))
	}
	seen := map[string]bool{}
	for i, cred := range c.Credentials {
		if err := ValidateCredentialHost(cred.Host); err != nil {
			errs = append(errs, fmt.Errorf("spec.job.cliConfig.credentials[%d]: %w", i, err))
		}
		if seen[cred.Host] {
			errs = append(errs, fmt.Errorf("spec.job.cliConfig.credentials[%d]: host %q is listed twice", i, cred.Host))
		}
		seen[cred.Host] = true
	}
	return errs
}
