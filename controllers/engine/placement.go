package engine

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// podTemplateProblem checks, live, the Secrets that spec.job.podTemplate mounts into the main
// container (jobs.CheckPodTemplateSecrets, the admission webhook's rule): a Secret that is, or
// became after admission, a ServiceAccount token holds the object with InputsValid=False,
// reason PodTemplateSecretRefused, so module code never reads a Kubernetes credential. A
// refusal is reported once, on the transition, as a Warning event. A missing Secret is no
// problem here: the Job's pod waits for it as any pod does.
func (p *pass) podTemplateProblem(ctx context.Context) (*decide.Problem, error) {
	refused, _, err := jobs.CheckPodTemplateSecrets(ctx, p.r.APIReader, p.obj.GetNamespace(), p.obj.GetTerraformSpec())
	if err != nil || len(refused) == 0 {
		return nil, err
	}
	msgs := make([]string, len(refused))
	for i, r := range refused {
		msgs[i] = r.Message
	}
	reason, msg := infrav1.PodTemplateSecretRefusedReason, strings.Join(msgs, "; ")
	if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, infrav1.InputsValidCondition); c == nil || c.Reason != reason {
		p.emit(corev1.EventTypeWarning, reason, msg)
	}
	return &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: reason, Message: msg}, nil
}
