package engine

import (
	"context"
	"fmt"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
)

// cliConfigProblem checks, live, the sources of spec.job.cliConfig (inputs.CheckCLIConfig): a
// missing or unlabelled one, or a missing key, holds the object with InputsValid=False before
// any Job hands it to the kubelet.
func (pr *preparer) cliConfigProblem(ctx context.Context) (*decide.Problem, error) {
	err := inputs.CheckCLIConfig(ctx, pr.live, pr.obj.GetNamespace(), pr.obj.GetTerraformSpec().Job.CLIConfig)
	if err == nil {
		return nil, nil
	}
	if ie, ok := inputs.AsInputsError(err); ok {
		return &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: ie.Reason, Message: ie.Message}, nil
	}
	return nil, fmt.Errorf("check cli config: %w", err)
}
