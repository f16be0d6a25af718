package webhooks

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// validateCLIConfig refuses a registry credential whose host is not a lowercase DNS host name
// with an optional port (jobs.ValidateCredentialHost): its token would go into a TF_TOKEN_
// variable that terraform reads back as another host, or as none. The schema refuses a host
// listed twice and both file sources at once; spec.job.env keeps every TF_* name reserved, so
// TF_CLI_CONFIG_FILE and TF_TOKEN_* come only from cliConfig. Whether the Secrets and the
// ConfigMap exist and opted in, the controller checks before every Job. It is pure.
func validateCLIConfig(path *field.Path, c *infrav1.CLIConfig) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	for i, cred := range c.Credentials {
		if err := jobs.ValidateCredentialHost(cred.Host); err != nil {
			errs = append(errs, field.Invalid(path.Child("credentials").Index(i).Child("host"), cred.Host,
				err.Error()+"; write the host as module sources spell it (registry.example.com, registry.example.com:8443), in lowercase Punycode"))
		}
	}
	return errs
}
