package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
)

// checkModuleSecrets judges, live through reader (the API server, not a cache), every Secret
// of namespace that the spec at path hands to module code (modulesecrets.Refs: spec.job.env,
// the Secret volumes of spec.job.podTemplate, spec.job.cliConfig, spec.variablesFrom) with
// the rule the controller applies again before every Job (modulesecrets.Check): a
// ServiceAccount token or a Secret without the opt-in label is refused. A Secret that does
// not exist yet, or cannot be read, is a warning: the controller holds the object until it
// exists and passes. reader nil skips the check.
func checkModuleSecrets(ctx context.Context, reader client.Reader, namespace string, path *field.Path, s *infrav1.TerraformSpec) (admission.Warnings, field.ErrorList) {
	if reader == nil {
		return nil, nil
	}
	refs := modulesecrets.Refs(path, s)
	if len(refs) == 0 {
		return nil, nil
	}
	res, err := modulesecrets.Check(ctx, reader, namespace, refs)
	if err != nil {
		return admission.Warnings{"CAPTF could not read the Secrets the spec hands to module code (" + err.Error() +
			"); the controller checks them again before every Job"}, nil
	}
	var warnings admission.Warnings
	if len(res.Missing) > 0 {
		names := make([]string, 0, len(res.Missing))
		for _, m := range res.Missing {
			names = append(names, m.Path.String()+" ("+m.Name+")")
		}
		warnings = admission.Warnings{"the Secrets named by " + strings.Join(names, ", ") + " do not exist yet or lack the key named: " +
			"the object runs no Job until they exist, carry the label " + modulesecrets.Label + "=" + modulesecrets.LabelValue +
			" and are not ServiceAccount tokens (the controller judges them again before every Job)"}
	}
	return warnings, res.Errs
}

// moduleSecretRefsChanged reports whether an update changes a reference that hands a Secret
// to module code: only then are the Secrets read again at admission, so an update of an
// admitted object (the controller's own writes) never waits on a Secret read.
func moduleSecretRefsChanged(oldSpec, newSpec *infrav1.TerraformSpec) bool {
	key := func(s *infrav1.TerraformSpec) string {
		var b strings.Builder
		for _, r := range modulesecrets.Refs(field.NewPath("spec"), s) {
			fmt.Fprintf(&b, "%s|%s|%s|%q|%t\n", r.Kind, r.Path, r.Name, r.Keys, r.Optional)
		}
		return b.String()
	}
	return key(oldSpec) != key(newSpec)
}
